import { describe, expect, it } from "vitest";
import { ColumnStore } from "../../js/shared/store.js";
import { ViewSync } from "../../js/shared/transport.js";
import { fakeModel, manualClock, op, snapshot, stepColumns, update } from "./helpers.js";

function makeSync(opts = {}) {
  const model = fakeModel();
  const clock = manualClock();
  const changes = [];
  const errors = [];
  const sync = new ViewSync(model, {
    series: ["steps"],
    viewId: "me",
    clock,
    onChange: (names) => changes.push([...names]),
    onError: (e) => errors.push(e),
    ...opts,
  });
  return { model, clock, changes, errors, sync };
}

describe("ColumnStore", () => {
  it("appends, and replaces the tail from `at` (the open bucket of a decimated series)", () => {
    const s = new ColumnStore();
    const a = op("steps", 0, stepColumns(1, 10));
    expect(s.apply(a.op, a.buffers)).toBe(true);
    expect(s.length).toBe(10);
    const b = op("steps", 8, stepColumns(9, 15, () => 7));
    expect(s.apply(b.op, b.buffers)).toBe(true);
    expect(s.length).toBe(15);
    expect([...s.column("step")]).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]);
    expect(s.column("loss")[7]).toBeCloseTo(1 / 8);
    expect(s.column("loss")[8]).toBe(7); // rows from `at` replaced
    expect(s.takeChangedFrom()).toBe(0);
    const c = op("steps", 15, stepColumns(16, 16));
    s.apply(c.op, c.buffers);
    expect(s.takeChangedFrom()).toBe(15);
  });

  it("shrinks when the kernel's series was halved (an op at 0 with fewer rows)", () => {
    const s = new ColumnStore();
    const a = op("steps", 0, stepColumns(1, 100));
    s.apply(a.op, a.buffers);
    const halved = op("steps", 0, stepColumns(1, 50), { width: 2, total: 100 });
    expect(s.apply(halved.op, halved.buffers)).toBe(true);
    expect(s.length).toBe(50);
    expect(s.column("step")).toHaveLength(50);
    expect(s.width).toBe(2);
  });

  it("refuses an op beyond the rows it holds, and a new schema that does not start at 0", () => {
    const s = new ColumnStore();
    const a = op("steps", 0, stepColumns(1, 5));
    s.apply(a.op, a.buffers);
    const gap = op("steps", 7, stepColumns(8, 9));
    expect(s.apply(gap.op, gap.buffers)).toBe(false);
    expect(s.length).toBe(5);
    const other = op("steps", 3, { step: ["int32", [4]] });
    expect(s.apply(other.op, other.buffers)).toBe(false);
    const fresh = op("steps", 0, { step: ["int32", [1, 2]], x: ["float32", [0.5, 0.25]] });
    expect(s.apply(fresh.op, fresh.buffers)).toBe(true);
    expect(s.fields).toEqual(["step", "x"]);
    expect(s.has("loss")).toBe(false);
    expect([...s.column("x")]).toEqual([0.5, 0.25]);
  });

  it("grows past its first allocation and keeps width and total", () => {
    const s = new ColumnStore();
    for (let k = 0; k < 5; k++) {
      const m = op("steps", k * 1000, stepColumns(k * 1000 + 1, (k + 1) * 1000), { width: 4, total: (k + 1) * 4000 });
      expect(s.apply(m.op, m.buffers)).toBe(true);
    }
    expect(s.length).toBe(5000);
    expect(s.column("step")[4999]).toBe(5000);
    expect(s.width).toBe(4);
    expect(s.total).toBe(20000);
  });

  it("refuses a buffer whose length disagrees with the op", () => {
    const s = new ColumnStore();
    const m = op("steps", 0, stepColumns(1, 4));
    m.op.count = 5;
    expect(() => s.apply(m.op, m.buffers)).toThrow(/carries 4 rows, the op says 5/);
  });
});

describe("ViewSync", () => {
  it("says hello with its view id and a request number", () => {
    const { model, sync } = makeSync();
    sync.hello();
    expect(model.sent.map((m) => m.content)).toEqual([{ kind: "hello", version: 2, view: "me", req: 1 }]);
    expect(sync.synced).toBe(false);
  });

  it("takes a snapshot in parts, ignores other views' snapshots, then applies numbered updates", () => {
    const { model, sync, changes } = makeSync();
    sync.hello();
    const other = snapshot("someone-else", 1, 5, [op("steps", 0, stepColumns(1, 3))]);
    sync.handle(other.content, other.buffers);
    expect(sync.stores.steps.length).toBe(0);
    const early = update(5, [op("steps", 0, stepColumns(1, 2))]); // before our snapshot: ignored
    sync.handle(early.content, early.buffers);
    expect(sync.stores.steps.length).toBe(0);
    const p0 = snapshot("me", 1, 7, [op("steps", 0, stepColumns(1, 100))], 0, 2);
    const p1 = snapshot("me", 1, 7, [op("steps", 100, stepColumns(101, 150))], 1, 2);
    sync.handle(p0.content, p0.buffers);
    expect(sync.synced).toBe(false);
    sync.handle(p1.content, p1.buffers);
    expect(sync.synced).toBe(true);
    expect(sync.seq).toBe(7);
    expect(sync.stores.steps.length).toBe(150);
    expect(changes).toEqual([["steps"]]);
    const old = update(7, [op("steps", 150, stepColumns(151, 151))]); // already in the snapshot
    sync.handle(old.content, old.buffers);
    expect(sync.stores.steps.length).toBe(150);
    const next = update(8, [op("steps", 150, stepColumns(151, 160))]);
    sync.handle(next.content, next.buffers);
    expect(sync.stores.steps.length).toBe(160);
    expect(sync.seq).toBe(8);
    expect(model.sent.filter((m) => m.content.kind === "hello")).toHaveLength(1);
  });

  it("says hello again when it sees a jump in the sequence", () => {
    const { model, sync } = makeSync();
    sync.hello();
    const s = snapshot("me", 1, 3, [op("steps", 0, stepColumns(1, 10))]);
    sync.handle(s.content, s.buffers);
    const skipped = update(5, [op("steps", 10, stepColumns(11, 12))]); // 4 never came
    sync.handle(skipped.content, skipped.buffers);
    expect(sync.synced).toBe(false);
    expect(model.lastHello()).toEqual({ kind: "hello", version: 2, view: "me", req: 2 });
    expect(sync.stores.steps.length).toBe(10);
  });

  it("says hello again when an op starts beyond the rows it holds", () => {
    const { model, sync } = makeSync();
    sync.hello();
    const s = snapshot("me", 1, 3, [op("steps", 0, stepColumns(1, 10))]);
    sync.handle(s.content, s.buffers);
    const beyond = update(4, [op("steps", 12, stepColumns(13, 14))]);
    sync.handle(beyond.content, beyond.buffers);
    expect(sync.synced).toBe(false);
    expect(model.lastHello().req).toBe(2);
  });

  it("says hello again, less and less often, while no snapshot comes", () => {
    const { model, sync, clock } = makeSync({ firstTimeoutMs: 1000, maxTimeoutMs: 4000 });
    sync.hello();
    const hellos = () => model.sent.filter((m) => m.content.kind === "hello").length;
    clock.advance(999);
    expect(hellos()).toBe(1);
    clock.advance(1);
    expect(hellos()).toBe(2); // after 1 s
    clock.advance(1999);
    expect(hellos()).toBe(2);
    clock.advance(1);
    expect(hellos()).toBe(3); // 2 s later
    clock.advance(4000);
    expect(hellos()).toBe(4); // then every 4 s at most
    clock.advance(4000);
    expect(hellos()).toBe(5);
    const s = snapshot("me", 5, 1, [op("steps", 0, stepColumns(1, 2))]);
    sync.handle(s.content, s.buffers);
    expect(sync.synced).toBe(true);
    expect(clock.pending()).toBe(0);
    clock.advance(60_000);
    expect(hellos()).toBe(5);
  });

  it("ignores the rest of an abandoned reply after a newer hello", () => {
    const { sync } = makeSync();
    sync.hello(); // req 1
    const a0 = snapshot("me", 1, 2, [op("steps", 0, stepColumns(1, 5))], 0, 2);
    sync.handle(a0.content, a0.buffers);
    sync.hello(); // req 2 (e.g. a timeout)
    const b0 = snapshot("me", 2, 3, [op("steps", 0, stepColumns(1, 8))], 0, 2);
    sync.handle(b0.content, b0.buffers);
    const a1 = snapshot("me", 1, 2, [op("steps", 5, stepColumns(6, 6))], 1, 2);
    sync.handle(a1.content, a1.buffers);
    expect(sync.synced).toBe(false);
    const b1 = snapshot("me", 2, 3, [op("steps", 8, stepColumns(9, 9))], 1, 2);
    sync.handle(b1.content, b1.buffers);
    expect(sync.synced).toBe(true);
    expect(sync.stores.steps.length).toBe(9);
    expect(sync.seq).toBe(3);
  });

  it("reports a protocol mismatch instead of applying it", () => {
    const { sync, errors } = makeSync();
    sync.hello();
    const s = snapshot("me", 1, 1, [op("steps", 0, stepColumns(1, 2))]);
    s.content.version = 99;
    expect(sync.handle(s.content, s.buffers)).toBe(true);
    expect(errors[0]).toMatch(/kernel speaks protocol 99, this page 2/);
    expect(sync.stores.steps.length).toBe(0);
  });

  it("keeps trying when the kernel cannot be reached", () => {
    const { model, sync, clock, errors } = makeSync({ firstTimeoutMs: 1000 });
    let fail = true;
    const send = model.send;
    model.send = (...a) => {
      if (fail) throw new Error("Comm is closed");
      send(...a);
    };
    sync.hello();
    expect(errors[0]).toMatch(/cannot reach the kernel \(Comm is closed\); retrying/);
    fail = false;
    clock.advance(1000);
    expect(model.lastHello()).toMatchObject({ kind: "hello", req: 2 });
  });

  it("lets other custom messages pass", () => {
    const { sync } = makeSync();
    expect(sync.handle({ kind: "something-else" }, [])).toBe(false);
  });
});
