// The wire protocol between the kernel-side widgets and this front end.
// Written down once here and once in nnx_lab/widgets/_protocol.py; the two must agree.
//
// Front end -> kernel (model.send):
//   {kind: "hello", version}  a view was rendered; the kernel answers with "reset"
//   {kind: "stop"}            the Stop button: stop after the current step
// Kernel -> front end ("msg:custom", with binary buffers):
//   {kind: "reset", ...SeriesPayload}   replace everything this view holds
//   {kind: "append", ...SeriesPayload}  new points / epoch rows since the last message
// Small state (run_id, status, counters, rates, error) arrives as synced traitlets.

export const PROTOCOL_VERSION = 1;

export const HELLO = "hello";
export const STOP = "stop";
export const RESET = "reset";
export const APPEND = "append";

/** Buffer order and element type of the step series (little-endian). */
export const STEP_FIELDS = /** @type {const} */ ([
  ["step", "int32"],
  ["loss", "float32"],
  ["lr", "float32"],
]);

export const STATUSES = ["created", "running", "stopping", "stopped", "finished", "failed"];

/**
 * @typedef {{epoch: number, step: number, lr: number|null, seconds: number|null,
 *   improved: boolean, train: Record<string, number|null>,
 *   val: Record<string, number|null>|null}} EpochRow
 * @typedef {{kind: "reset"|"append", version: number, start: number, count: number,
 *   fields: string[], dtypes: string[], epochs_start: number, epochs: EpochRow[]}} SeriesPayload
 * @typedef {{step: Int32Array, loss: Float32Array, lr: Float32Array}} StepColumns
 */

const ARRAYS = { int32: Int32Array, float32: Float32Array, float64: Float64Array };

/**
 * Turn a received buffer (DataView, ArrayBuffer or typed array) into a typed array
 * of the given dtype. The bytes are copied, so alignment of the source never matters.
 * @param {DataView|ArrayBuffer|ArrayBufferView} buf
 * @param {string} dtype
 */
export function toTypedArray(buf, dtype) {
  const Ctor = ARRAYS[/** @type {keyof typeof ARRAYS} */ (dtype)];
  if (!Ctor) throw new Error(`nnx-lab: unknown buffer dtype ${dtype}`);
  /** @type {Uint8Array} */
  let bytes;
  if (buf instanceof ArrayBuffer) bytes = new Uint8Array(buf);
  else bytes = new Uint8Array(buf.buffer, buf.byteOffset, buf.byteLength);
  const copy = new Uint8Array(bytes.byteLength);
  copy.set(bytes);
  return new Ctor(copy.buffer, 0, Math.floor(bytes.byteLength / Ctor.BYTES_PER_ELEMENT));
}

/**
 * Decode the buffers of a reset/append message into named columns.
 * @param {SeriesPayload} msg
 * @param {Array<DataView|ArrayBuffer|ArrayBufferView>} buffers
 * @returns {StepColumns}
 */
export function decodeColumns(msg, buffers) {
  if (msg.version !== PROTOCOL_VERSION) {
    throw new Error(
      `nnx-lab: the kernel speaks protocol ${msg.version}, this page ${PROTOCOL_VERSION}; ` +
        "reload the page after reinstalling nnx-lab",
    );
  }
  /** @type {Record<string, any>} */
  const out = {};
  msg.fields.forEach((name, i) => {
    const buf = buffers[i];
    out[name] = buf ? toTypedArray(buf, msg.dtypes[i]) : new Float32Array(0);
  });
  for (const [name, dtype] of STEP_FIELDS) {
    if (!out[name]) out[name] = new ARRAYS[dtype](msg.count);
  }
  return /** @type {StepColumns} */ (out);
}
