// The GenerationPlayground view: continuations side by side, token probabilities on
// hover, the settings sent to the kernel with a "generate" request, and the built bundle.
import { afterEach, describe, expect, it } from "vitest";
import { PlaygroundView, shade, tipText, tokenLabel } from "../../js/playground/view.js";
import { builtWidget, byTestId, disposeView, fakeModel, testHost } from "./helpers.js";

const el = testHost();
const q = byTestId(el);
let view;
afterEach(() => (view = disposeView(view)));

const tok = (text, prob) => ({ text, prob, top: [[text, prob], ["x", 0.1]] });
const SAMPLES = [
  { text: "cat.", tokens: [tok("c", 0.9), tok("a", 0.5), tok("t", 0.8), tok(".", 0.3)] },
  { text: "dog", tokens: [tok("d", 0.2), tok("o", 0.7), tok("g", 0.6)] },
];

function pgModel(extra = {}) {
  return fakeModel({ prompt: "the ", temperature: 1, top_k: 0, top_p: 1, seed: 0, n: 2, max_new_tokens: 4, samples: SAMPLES, epoch: 0, version: 1, error: "", ...extra });
}

describe("GenerationPlayground helpers", () => {
  it("labels tokens, describes them and shades by probability", () => {
    expect(tokenLabel("a\nb")).toBe("a\\nb");
    expect(tipText(tok("a", 0.5))).toBe('"a": p = 50.0%; most likely: "a" 50.0%, "x" 10.0%');
    expect(shade(1)).toBe("rgba(255, 152, 0, 0.000)");
    expect(shade(0)).toBe("rgba(255, 152, 0, 0.450)");
  });
});

describe("GenerationPlayground view", () => {
  it("draws each continuation after the prompt, a token per span", () => {
    view = new PlaygroundView(pgModel(), el);
    const cards = el.querySelectorAll('[data-testid="sample"]');
    expect(cards.length).toBe(2);
    expect(cards[0].textContent).toBe("the cat.");
    expect(cards[1].querySelectorAll('[data-testid="token"]').length).toBe(3);
    expect(q("status").textContent).toBe("2 continuations");
  });

  it("shows a token's probability and the step's top tokens on hover", () => {
    view = new PlaygroundView(pgModel(), el);
    const second = el.querySelectorAll('[data-testid="token"]')[1];
    second.dispatchEvent(new Event("mouseenter"));
    expect(q("tip").textContent).toBe(tipText(SAMPLES[0].tokens[1]));
    expect(second.title).toContain("p = 50.0%");
  });

  it("sends the settings, then asks the kernel to generate", () => {
    const model = pgModel();
    view = new PlaygroundView(model, el);
    q("temperature").value = "0.5";
    q("temperature").dispatchEvent(new Event("change"));
    expect(model.get("temperature")).toBe(0.5);
    expect(model.sent.at(-1).content).toEqual({ kind: "generate" });
    q("prompt").value = "a ";
    q("generate").click();
    expect(model.get("prompt")).toBe("a ");
    expect(model.sent.filter((m) => m.content.kind === "generate").length).toBe(2);
  });

  it("redraws when the kernel sends an epoch's samples", () => {
    const model = pgModel();
    view = new PlaygroundView(model, el);
    model.set("samples", SAMPLES.slice(1));
    model.set("epoch", 3);
    expect(el.querySelectorAll('[data-testid="sample"]').length).toBe(1);
    expect(q("status").textContent).toBe("1 continuation, drawn after epoch 3");
  });

  it("is built as an anywidget module", async () => {
    const widget = await builtWidget("playground");
    const model = pgModel();
    const dispose = widget.render({ model, el });
    expect(el.querySelectorAll('[data-testid="sample"]').length).toBe(2);
    dispose();
    expect(model.listenerCount()).toBe(0);
  });
});
