// Replays messages a kernel-side widget sent through the real view-side transport
// (js/shared/transport.js) and prints what the view then holds. Used by
// tests/python/test_widget_contract.py:  node tests/js/replay.mjs messages.json
//
// Input: {"view": id, "series": [names], "accept": regex or null (series added later),
//         "messages": [{"content": {...}, "buffers": [base64...]}]}
// Output: {"synced", "seq", "hellos", "series": {name: {"width", "total", "columns": {field: [values]}}}}
import { readFileSync } from "node:fs";
import { ViewSync } from "../../js/shared/transport.js";

const input = JSON.parse(readFileSync(process.argv[2], "utf8"));
const sent = [];
const model = { send: (content) => sent.push(content) };
const sync = new ViewSync(model, {
  series: input.series,
  viewId: input.view,
  accept: input.accept ? (name) => new RegExp(input.accept).test(name) : undefined,
  onChange() {},
  clock: { setTimeout: () => 0, clearTimeout() {}, now: () => 0 },
});
sync.hello();
for (const m of input.messages) {
  const buffers = m.buffers.map((b64) => {
    const bytes = Buffer.from(b64, "base64");
    return new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  });
  sync.handle(m.content, buffers);
}
const series = {};
for (const [name, store] of Object.entries(sync.stores)) {
  const columns = {};
  for (const f of store.fields) columns[f] = Array.from(store.column(f), (v) => (Number.isFinite(v) ? v : String(v)));
  series[name] = { width: store.width, total: store.total, length: store.length, columns };
}
process.stdout.write(JSON.stringify({ synced: sync.synced, seq: sync.seq, hellos: sent.filter((c) => c.kind === "hello").length, series }));
