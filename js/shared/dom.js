// DOM helpers shared by the widgets' views: element building, downloads, CSV.

/**
 * An element with attributes ("text" sets textContent) and children.
 * @param {string} tag
 * @param {Record<string, string>} [attrs]
 * @param {(Node|string)[]} [children]
 */
export function h(tag, attrs = {}, children = []) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "text") node.textContent = v;
    else node.setAttribute(k, v);
  }
  for (const c of children) node.append(c);
  return node;
}

/** Offer `blob` as a file download named `filename`. */
export function download(filename, blob) {
  const url = URL.createObjectURL(blob);
  const a = h("a", { href: url, download: filename });
  a.style.display = "none";
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

/** A CSV field: quoted when it holds a comma, a quote or a line break. */
function csvField(v) {
  const s = v === null || v === undefined ? "" : String(v);
  return /[",\n\r]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
}

/**
 * A float32 value in the fewest digits that read back as the same float32:
 * 0.009999999776482582 (the float32 nearest 0.01, widened) is "0.01".
 * @param {number} v a finite number held in a Float32Array
 */
export function float32Text(v) {
  for (let p = 1; p <= 9; p++) {
    const s = Number(v.toPrecision(p));
    if (Math.fround(s) === v) return String(s);
  }
  return String(v);
}

/**
 * CSV text of named columns (equal lengths). Non-finite numbers are written as
 * "nan" / "inf" / "-inf", so a reader can tell them from a missing value. A number is
 * written at the precision it was computed in: a Float32Array's values in the shortest
 * text that reads back as the same float32, others as JavaScript writes a double.
 * `blanks` (per column, optional) marks the cells that have no value: they are empty.
 * @param {string[]} names @param {ArrayLike<any>[]} columns
 * @param {(ArrayLike<number>|null)[] | null} [blanks]  1 where a cell is left empty
 */
export function toCSV(names, columns, blanks = null) {
  const n = columns.length ? columns[0].length : 0;
  const lines = [names.map(csvField).join(",")];
  const single = columns.map((col) => col instanceof Float32Array);
  for (let i = 0; i < n; i++) {
    const row = columns.map((col, j) => {
      if (blanks && blanks[j] && blanks[j][i]) return "";
      const v = col[i];
      if (typeof v !== "number") return csvField(v);
      if (Number.isNaN(v)) return "nan";
      if (!Number.isFinite(v)) return v > 0 ? "inf" : "-inf";
      return single[j] ? float32Text(v) : String(v);
    });
    lines.push(row.join(","));
  }
  return `${lines.join("\n")}\n`;
}

/** Legend: one swatch and label per item. */
export function legend(items) {
  const box = h("div", { class: "nnx-legend" });
  for (const [label, color, style] of items) {
    const swatch = h("span", { class: `nnx-swatch ${style || ""}` });
    swatch.style.borderColor = color;
    box.append(h("span", { class: "nnx-legend-item" }, [swatch, label]));
  }
  return box;
}

/** Call `fn` when a text or number box's value is committed: Enter, or leaving the box. */
export function onCommit(input, fn) {
  input.addEventListener("change", fn);
  input.addEventListener("keydown", (e) => {
    if (e.key === "Enter") fn();
  });
}

/**
 * Coalesce redraw requests into one call of `fn` per animation frame (at once where
 * there are no frames, as in tests). `schedule()` asks, `cancel()` drops a pending one.
 */
export function frameScheduler(fn) {
  let frame = 0;
  const run = () => {
    frame = 0;
    fn();
  };
  return {
    schedule() {
      if (frame) return;
      frame = typeof requestAnimationFrame === "function" ? requestAnimationFrame(run) : (run(), 0);
    },
    cancel() {
      if (frame && typeof cancelAnimationFrame === "function") cancelAnimationFrame(frame);
      frame = 0;
    },
  };
}
