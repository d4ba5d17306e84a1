import { describe, expect, it } from "vitest";
import { LatestRequest } from "../../js/shared/latest.js";
import { manualClock } from "./helpers.js";

function setup(timeoutMs = 2000) {
  const clock = manualClock();
  const sent = [];
  const req = new LatestRequest((v) => sent.push(v), { timeoutMs, timers: clock });
  return { clock, sent, req };
}

describe("LatestRequest (one value in flight, the newest next)", () => {
  it("sends at once when idle, holds newer values while one is in flight, and sends only the newest", () => {
    const { sent, req } = setup();
    req.request(1);
    req.request(2);
    req.request(3);
    req.request(4);
    expect(sent).toEqual([1]);
    expect(req.busy).toBe(true);
    req.answered();
    expect(sent).toEqual([1, 4]); // 2 and 3 were overtaken before they left
    req.answered();
    expect(sent).toEqual([1, 4]);
    expect(req.busy).toBe(false);
  });

  it("does not send again the value that is already the last sent", () => {
    const { sent, req } = setup();
    req.request(5);
    req.request(6);
    req.request(5);
    req.answered();
    expect(sent).toEqual([5]);
    expect(req.busy).toBe(false);
  });

  it("gives up on a lost answer after the timeout, then goes on", () => {
    const { clock, sent, req } = setup(500);
    req.request("a");
    req.request("b");
    clock.advance(499);
    expect(sent).toEqual(["a"]);
    clock.advance(1);
    expect(sent).toEqual(["a", "b"]);
    expect(clock.pending()).toBe(1); // "b" waits for its own answer
    req.answered();
    expect(clock.pending()).toBe(0);
    req.dispose();
  });
});
