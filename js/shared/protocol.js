// The wire protocol between nnx-lab's kernel-side widgets and their views.
// Written down once here and once in nnx_lab/widgets/_protocol.py (the reference,
// with the full description); a test checks that the two agree.
//
// View -> kernel (model.send):
//   {kind: "hello", version, view, req}   a view was rendered or lost track: send me everything
//   {kind: "stop"}                        the Stop button
//   {kind: "snapshot_png", view, run_id}  + one PNG buffer: the charts, for a reopened notebook
//   {kind: "fit"}                         an explorer's Fit button (calibration: fit the temperature)
//   {kind: "save"}                        an explorer's Save button (writes to its `path` trait)
//   {kind: "figure", view, name, epoch}   the monitor's figure panel: send me this figure
//   {kind: "report", view}                the monitor's Report button: write the run's HTML report
// Kernel -> views ("msg:custom", with binary buffers):
//   {kind: "update", version, seq, ops}                        to every view, throttled
//   {kind: "snapshot", version, seq, to, req, part, parts, ops}  everything, for one view, chunked
//   {kind: "figure_data", to, name, epoch, figure_kind}  + one buffer (or error): the figure asked for
//   {kind: "report_done", to, path}                     (or error): where the report was written
// Op: {series, at, count, fields, dtypes, width, total, buffer}: keep the first `at`
// rows of the series, append `count` rows from buffers[buffer ...] (one per field).

export const PROTOCOL_VERSION = 2;

export const HELLO = "hello";
export const STOP = "stop";
export const SNAPSHOT_PNG = "snapshot_png";
export const FIT = "fit";
export const SAVE = "save";
export const REPORT = "report";
export const REPORT_DONE = "report_done";
export const UPDATE = "update";
export const SNAPSHOT = "snapshot";

export const MAX_MESSAGE_BYTES = 524288;

export const STATUSES = [
  "created",
  "running",
  "stopping",
  "stopped",
  "finished",
  "failed",
  "interrupted",
];

/** Typed-array constructors of the wire dtypes (little-endian). */
export const DTYPES = { int32: Int32Array, float32: Float32Array, float64: Float64Array };

/**
 * Turn a received buffer (DataView, ArrayBuffer or typed array) into a typed array
 * of the given dtype. The bytes are copied, so the source's alignment never matters.
 * @param {DataView|ArrayBuffer|ArrayBufferView} buf
 * @param {string} dtype
 */
export function toTypedArray(buf, dtype) {
  const Ctor = DTYPES[/** @type {keyof typeof DTYPES} */ (dtype)];
  if (!Ctor) throw new Error(`nnx-lab: unknown buffer dtype ${dtype}`);
  const bytes = buf instanceof ArrayBuffer ? new Uint8Array(buf) : new Uint8Array(buf.buffer, buf.byteOffset, buf.byteLength);
  const copy = new Uint8Array(bytes.byteLength);
  copy.set(bytes);
  return new Ctor(copy.buffer, 0, Math.floor(bytes.byteLength / Ctor.BYTES_PER_ELEMENT));
}

/** The message a view shows when the kernel speaks another protocol version. */
export function versionMismatch(version) {
  return (
    `nnx-lab: the kernel speaks protocol ${version}, this page ${PROTOCOL_VERSION}; ` +
    "reload the page after reinstalling nnx-lab (or restart the kernel)"
  );
}
