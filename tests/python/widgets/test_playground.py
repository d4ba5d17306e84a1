"""GenerationPlayground: continuations drawn in the kernel through nnx_lab.lm_tasks, the
page's settings applied, redrawn each epoch as a callback without changing the run."""

from __future__ import annotations

import pytest
import torch

from nnx_lab import (
    ConfigError,
    DataError,
    Nets,
    NNModel,
    NNModelParams,
    NNOptimParams,
    NNTrainParams,
    NNTransformerParams,
)
from nnx_lab.lm_tasks import CausalLMTask, CharTokenizer, generate_details, lm_loaders, toy_corpus
from nnx_lab.widgets import GenerationPlayground
from nnx_lab.widgets._testing import FakeFrontend

TEXTS = toy_corpus(120, seed=0)
TOK = CharTokenizer.from_texts(TEXTS)
NET = NNTransformerParams(
    vocab_size=TOK.vocab_size, n_layers=1, d_model=16, n_heads=2, max_seq_len=32
)


def _model(seed=0):
    return NNModel(NET, NNModelParams(net=Nets.TRANSFORMER), init_seed=seed)


def test_the_playground_draws_what_generate_draws_with_its_settings():
    model = _model()
    w = GenerationPlayground(
        model, TOK, "the ", n=2, max_new_tokens=6, temperature=0.7, top_k=5, seed=3
    )
    try:
        ref = generate_details(
            model.net,
            TOK.encode("the "),
            6,
            temperature=0.7,
            top_k=5,
            seed=3,
            n=2,
            eos_id=TOK.eos_id,
        )
        assert w.texts() == [TOK.decode(r) for r in ref.new]
        first = w.samples[0]["tokens"][0]
        assert first["prob"] == pytest.approx(float(ref.probs[0, 0]))
        assert len(first["top"]) == 5
        assert first["top"][0][1] >= first["prob"] - 1e-6 or first["top"][0][0] == first["text"]
        front = FakeFrontend(w)
        front.set_traits(seed=4, temperature=0.0)  # greedy: every continuation alike
        front.widget._dispatch_frontend_msg(w, {"kind": "generate"}, [])
        assert w.version == 2
        assert w.texts()[0] == w.texts()[1]
        assert any("samples" in u for u in front.updates)
        assert "2 continuations of 'the '" in repr(w)
    finally:
        w.close()


def test_bad_arguments_are_refused_before_a_widget_exists():
    with pytest.raises(ConfigError, match=r"NNModel or an nn\.Module"):
        GenerationPlayground("model", TOK)
    with pytest.raises(ConfigError, match="encode"):
        GenerationPlayground(_model(), object())
    with pytest.raises(DataError, match="'#'"):
        GenerationPlayground(_model(), TOK, "#")
    with pytest.raises(ConfigError, match=r"TopPFilter\.p"):
        GenerationPlayground(_model(), TOK, "a", top_p=0.0)


def test_as_a_callback_it_redraws_each_epoch_and_changes_nothing_in_the_run(runs_root):
    task = CausalLMTask(TOK.vocab_size)

    def fit(callbacks, root):
        train, _ = lm_loaders(TEXTS, TOK, length=33, batch_size=8, val_fraction=0.0)
        model = _model()
        model.train(
            NNTrainParams(
                n_epochs=2,
                train_loader=train,
                optim=NNOptimParams(max_lr=0.01),
                runs_root=root,
                progress=False,
                checkpoint_every_s=0,
            ),
            objective=task.objective(),
            callbacks=callbacks,
        )
        return model

    w = GenerationPlayground(_model(), TOK, "a ", max_new_tokens=4, draw=False)
    try:
        watched = fit([w], runs_root / "a")
        assert w.epoch == 2
        assert w.version == 2  # one draw per epoch
        assert w._net is watched.net
        plain = fit([], runs_root / "b")
        for a, b in zip(
            watched.net.state_dict().values(), plain.net.state_dict().values(), strict=True
        ):
            assert torch.equal(a, b)
    finally:
        w.close()
