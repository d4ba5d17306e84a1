// Runs js/calibration/measure.js on the buffers a CalibrationExplorer sends in browser
// mode, and prints what it measures. Used by tests/python/test_calibration_explorer.py:
//   node tests/js/measure_replay.mjs input.json
// Input: {"z": base64 float32, "y": base64 int32, "bins": n, "temperatures": [...]}
import { readFileSync } from "node:fs";
import { measure, prepare } from "../../js/calibration/measure.js";

const input = JSON.parse(readFileSync(process.argv[2], "utf8"));
const bytes = (b64) => {
  const buf = Buffer.from(b64, "base64");
  const copy = new Uint8Array(buf.byteLength);
  copy.set(buf);
  return copy.buffer;
};
const prepared = prepare(new Float32Array(bytes(input.z)), new Int32Array(bytes(input.y)));
const points = input.temperatures.map((t) => {
  const m = measure(prepared, input.bins, t);
  return { count: Array.from(m.count), confidence: Array.from(m.confidence), correct: Array.from(m.correct), nll: m.nll, brier: m.brier, ece: m.ece };
});
process.stdout.write(JSON.stringify({ accuracy: prepared.accuracy, points }));
