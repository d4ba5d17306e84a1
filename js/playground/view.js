// GenerationPlayground's view: the prompt and the sampling settings (page traits), a
// "generate" button, and the continuations the kernel drew, side by side. Each token is
// shaded by its probability; hovering one shows that probability and the five most
// likely tokens at that step. The view draws what the kernel sent: it samples nothing.
import { h, onCommit } from "../shared/dom.js";
import { WidgetView } from "../shared/view.js";

/** A token as shown: newlines and tabs visible, a space kept. */
export function tokenLabel(text) {
  return String(text).replace(/\n/g, "\\n").replace(/\t/g, "\\t");
}

/** The hover line of one token: its probability, then the step's most likely tokens. */
export function tipText(token) {
  const pct = (p) => `${(100 * p).toFixed(1)}%`;
  const top = (token.top || []).map(([t, p]) => `${JSON.stringify(tokenLabel(t))} ${pct(p)}`).join(", ");
  return `${JSON.stringify(tokenLabel(token.text))}: p = ${pct(token.prob)}; most likely: ${top}`;
}

/** Background shade of a token: transparent when certain, stronger the less likely. */
export function shade(prob) {
  const alpha = Math.max(0, Math.min(1, 1 - prob)) * 0.45;
  return `rgba(255, 152, 0, ${alpha.toFixed(3)})`;
}

const SETTINGS = [
  // [trait, label, attrs]
  ["temperature", "temperature", { type: "range", min: "0", max: "2", step: "0.05" }],
  ["top_k", "top-k", { type: "number", min: "0", step: "1" }],
  ["top_p", "top-p", { type: "range", min: "0.05", max: "1", step: "0.05" }],
  ["seed", "seed", { type: "number", min: "0", step: "1" }],
  ["n", "continuations", { type: "number", min: "1", max: "8", step: "1" }],
  ["max_new_tokens", "tokens", { type: "number", min: "1", max: "512", step: "1" }],
];
const INTS = new Set(["top_k", "seed", "n", "max_new_tokens"]);

export class PlaygroundView extends WidgetView {
  /** @param {import("../shared/view.js").Model} model @param {HTMLElement} el */
  constructor(model, el) {
    super(model, el);
    this._build();
    for (const name of ["samples", "prompt", "epoch", "version", ...SETTINGS.map((s) => s[0])]) this._on(`change:${name}`, () => this._render());
    this._on("change:error", () => this._error());
    this._render();
  }

  _build() {
    this._makeRoot("nnx-pg", "Generation playground");
    this.prompt = h("input", { type: "text", class: "nnx-pg-prompt", placeholder: "a prompt", "aria-label": "prompt", "data-testid": "prompt" });
    onCommit(this.prompt, () => this._generate({ prompt: this.prompt.value }));
    /** @type {Record<string, HTMLInputElement>} */
    this.inputs = {};
    /** @type {Record<string, HTMLElement>} */
    this.values = {};
    const controls = SETTINGS.map(([name, label, attrs]) => {
      const input = h("input", { ...attrs, "aria-label": label, "data-testid": name });
      const value = h("span", { class: "nnx-pg-value", "data-testid": `${name}-value` });
      input.addEventListener("change", () => {
        const v = INTS.has(name) ? parseInt(input.value, 10) : parseFloat(input.value);
        if (Number.isFinite(v)) this._generate({ [name]: v });
      });
      input.addEventListener("input", () => (value.textContent = input.value));
      this.inputs[name] = input;
      this.values[name] = value;
      return h("label", {}, [label, input, attrs.type === "range" ? value : ""]);
    });
    this.button = h("button", { type: "button", class: "nnx-button", "data-testid": "generate", text: "generate" });
    this.button.addEventListener("click", () => this._generate({ prompt: this.prompt.value }));
    this.status = h("span", { class: "nnx-pg-status", "data-testid": "status", role: "status" });
    this.grid = h("div", { class: "nnx-pg-grid", "data-testid": "samples" });
    this.tip = h("p", { class: "nnx-pg-tip", "data-testid": "tip" });
    this.root.append(
      h("div", { class: "nnx-pg-title", text: "Generation playground" }),
      h("div", { class: "nnx-pg-bar" }, [this.prompt, this.button]),
      h("div", { class: "nnx-pg-bar" }, [...controls, this.status]),
      this.grid,
      this.tip,
      this._makeError(),
    );
  }

  /** Set the page's traits, then ask the kernel to draw with them. */
  _generate(changes) {
    for (const [name, value] of Object.entries(changes)) this.model.set(name, value);
    this.model.save_changes();
    this.model.send({ kind: "generate" });
  }

  _render() {
    const m = this.model;
    const prompt = m.get("prompt") || "";
    if (document.activeElement !== this.prompt && this.prompt.value !== prompt) this.prompt.value = prompt;
    for (const [name] of SETTINGS) {
      const v = String(m.get(name));
      if (this.inputs[name].value !== v) this.inputs[name].value = v;
      this.values[name].textContent = v;
    }
    const samples = m.get("samples") || [];
    this.grid.replaceChildren(
      ...samples.map((s, i) => {
        const tokens = (s.tokens || []).map((tok) => {
          const span = h("span", { class: "nnx-pg-tok", "data-testid": "token", text: tok.text, title: tipText(tok) });
          span.style.background = shade(tok.prob);
          span.addEventListener("mouseenter", () => (this.tip.textContent = tipText(tok)));
          return span;
        });
        return h("div", { class: "nnx-pg-card", "data-testid": "sample", "aria-label": `continuation ${i + 1}` }, [h("span", { class: "nnx-pg-prompt-text", text: prompt }), ...tokens]);
      }),
    );
    const epoch = m.get("epoch") || 0;
    this.status.textContent = `${samples.length} continuation${samples.length === 1 ? "" : "s"}` + (epoch ? `, drawn after epoch ${epoch}` : "");
  }
}
