// The lines under the charts that read out the values under the pointer: a step (or a
// bucket of steps) on the loss and lr charts, an epoch on the epoch chart; in a race,
// each run's value there.
import { fmtInt, fmtValue } from "../shared/format.js";
import { epochMetrics, fmtRange } from "./epochs.js";

/** @typedef {import("./view.js").MonitorView} MonitorView */

const none = (idx, length) => idx === null || idx === undefined || idx >= length;

/** The loss and lr readouts at row `idx` of the step series (null: the pointer left). @param {MonitorView} v */
export function lossReadout(v, idx) {
  if (v._lanes.length) {
    raceLossReadout(v, idx);
    return;
  }
  const s = v._stepsStore();
  if (!s || none(idx, s.length)) {
    v.lossReadout.textContent = "";
    v.lrReadout.textContent = "";
    return;
  }
  const first = s.column("first")[idx];
  const last = s.column("step")[idx];
  const loss = s.column("loss")[idx];
  const bad = s.column("bad")[idx];
  const lo = s.column("loss:min")[idx];
  const hi = s.column("loss:max")[idx];
  const sm = v._smoothed ? v._smoothed[idx] : NaN;
  const lr = s.column("lr")[idx];
  const stepText = first === last ? `step ${fmtInt(last)}` : `steps ${fmtRange(first, last)}`;
  let lossText = Number.isFinite(loss) ? `loss ${fmtValue(loss)}` : "loss non-finite";
  if (first !== last && Number.isFinite(lo)) lossText += ` (${fmtValue(lo)} to ${fmtValue(hi)})`;
  if (bad && Number.isFinite(loss)) lossText += `, ${fmtInt(bad)} non-finite`;
  const named = v._parts || { terms: [], lrs: [] };
  // the terms as logged (not stacked), each optimizer's lr by its name
  const terms = named.terms.map((t) => `${t.label} ${fmtValue(s.column(t.key)[idx])}`);
  const lrs = named.lrs.length ? named.lrs.map((t) => `${t.label} ${fmtValue(s.column(t.key)[idx])}`) : [`lr ${fmtValue(lr)}`];
  const parts = [stepText, lossText, ...terms, `smoothed ${Number.isFinite(sm) ? fmtValue(sm) : "–"}`, ...lrs];
  v.lossReadout.textContent = parts.join(" · ");
  v.lrReadout.textContent = [stepText, ...lrs].join(" · ");
}

function raceLossReadout(v, idx) {
  const race = v._race;
  if (!race || none(idx, race.loss.x.length)) {
    v.lossReadout.textContent = "";
    v.lrReadout.textContent = "";
    return;
  }
  const parts = [`step ${fmtInt(race.loss.x[idx])}`];
  const lrs = [`step ${fmtInt(race.loss.x[idx])}`];
  v._lanes.forEach((lane, i) => {
    const loss = race.loss.ys[i][idx];
    if (loss !== undefined) parts.push(`${lane.name} ${Number.isFinite(loss) ? fmtValue(loss) : "non-finite"}`);
  });
  // each lr line by its name: the run's, or "<run> · <optimizer>" (race.js raceLrLines)
  race.lr.lines.forEach((line, j) => {
    const r = race.lr.ys[j] ? race.lr.ys[j][idx] : undefined;
    if (r !== undefined) lrs.push(`${line.label} ${fmtValue(r)}`);
  });
  v.lossReadout.textContent = parts.join(" · ");
  v.lrReadout.textContent = lrs.join(" · ");
}

/** The epoch readout at row `idx` of the epoch series (null: the pointer left). @param {MonitorView} v */
export function epochReadout(v, idx) {
  if (v._lanes.length) {
    const d = v._raceEpochData;
    if (!d || none(idx, d.x.length)) {
      v.epochReadout.textContent = "";
      return;
    }
    const parts = [`epoch ${fmtInt(d.x[idx])}`];
    v._lanes.forEach((lane, i) => {
      const value = d.ys[i][idx];
      if (value !== undefined) parts.push(`${lane.name} ${fmtValue(value)}`);
    });
    v.epochReadout.textContent = parts.join(" · ");
    return;
  }
  const e = v.sync.stores.epochs;
  if (none(idx, e.length)) {
    v.epochReadout.textContent = "";
    return;
  }
  const parts = [`epoch ${fmtRange(e.column("first")[idx], e.column("epoch")[idx])}`];
  const { val, train } = epochMetrics(v);
  for (const n of val) parts.push(`val ${n} ${fmtValue(e.column(`val.${n}`)[idx])}`);
  for (const n of train) parts.push(`train ${n} ${fmtValue(e.column(`train.${n}`)[idx])}`);
  v.epochReadout.textContent = parts.join(" · ");
}
