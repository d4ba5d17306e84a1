// happy-dom has no 2D canvas: give it one that records what is drawn, and a Path2D
// that records its segments, so tests can check what the real chart code drew.

class RecordingPath2D {
  constructor(from) {
    /** @type {Array<[string, ...number[]]>} */
    this.ops = from instanceof RecordingPath2D ? [...from.ops] : [];
  }
  moveTo(x, y) { this.ops.push(["moveTo", x, y]); }
  lineTo(x, y) { this.ops.push(["lineTo", x, y]); }
  rect(x, y, w, h) { this.ops.push(["rect", x, y, w, h]); }
  arc(x, y, r, a0, a1) { this.ops.push(["arc", x, y, r, a0, a1]); }
  closePath() { this.ops.push(["closePath"]); }
  bezierCurveTo(...a) { this.ops.push(["bezierCurveTo", ...a]); }
  quadraticCurveTo(...a) { this.ops.push(["quadraticCurveTo", ...a]); }
  arcTo(...a) { this.ops.push(["arcTo", ...a]); }
  roundRect(...a) { this.ops.push(["roundRect", ...a]); }
  addPath(p) { if (p && p.ops) this.ops.push(...p.ops); }
}
globalThis.Path2D = RecordingPath2D;
if (typeof window !== "undefined") window.Path2D = RecordingPath2D;

function recordingContext(canvas) {
  const calls = [];
  const state = { strokeStyle: "#000", fillStyle: "#000", lineWidth: 1, font: "10px sans-serif", globalAlpha: 1 };
  const record = (op) => (...args) => { calls.push({ op, args, strokeStyle: ctx.strokeStyle, fillStyle: ctx.fillStyle }); };
  const ctx = {
    canvas,
    calls,
    ...state,
    save: record("save"),
    restore: record("restore"),
    beginPath: record("beginPath"),
    closePath: record("closePath"),
    moveTo: record("moveTo"),
    lineTo: record("lineTo"),
    rect: record("rect"),
    arc: record("arc"),
    stroke: record("stroke"),
    fill: record("fill"),
    clip: record("clip"),
    fillText: record("fillText"),
    strokeText: record("strokeText"),
    fillRect: record("fillRect"),
    strokeRect: record("strokeRect"),
    clearRect: record("clearRect"),
    drawImage: record("drawImage"),
    setLineDash: record("setLineDash"),
    translate: record("translate"),
    scale: record("scale"),
    rotate: record("rotate"),
    setTransform: record("setTransform"),
    resetTransform: record("resetTransform"),
    measureText: (text) => ({ width: 6 * String(text).length, actualBoundingBoxAscent: 8, actualBoundingBoxDescent: 2 }),
    createLinearGradient: () => ({ addColorStop() {} }),
    createPattern: () => null,
    getImageData: (x, y, w, h) => ({ data: new Uint8ClampedArray(w * h * 4), width: w, height: h }),
    putImageData: record("putImageData"),
  };
  return ctx;
}

const proto = HTMLCanvasElement.prototype;
proto.getContext = function getContext(kind) {
  if (kind !== "2d") return null;
  if (!this.__ctx) this.__ctx = recordingContext(this);
  return this.__ctx;
};
proto.toBlob = function toBlob(cb, type = "image/png") {
  const png = new Uint8Array([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 0]);
  setTimeout(() => cb(new Blob([png], { type })), 0);
};
