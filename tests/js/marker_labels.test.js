// Where marker labels go (shared/marker_labels.js): beside their line, never on top of
// one another, inside the plot.
import { describe, expect, it } from "vitest";
import { labelsOverlap, placeLabels } from "../../js/shared/marker_labels.js";

const BOX = { left: 50, right: 650 };

function noOverlap(placed) {
  for (let i = 0; i < placed.length; i++) {
    for (let j = i + 1; j < placed.length; j++) expect(labelsOverlap(placed[i], placed[j]), `${i} and ${j}`).toBe(false);
  }
}

describe("placeLabels", () => {
  it("puts a lone label right of its line, or left of it at the plot's right edge", () => {
    expect(placeLabels([{ px: 100, width: 80 }], BOX)).toEqual([{ x0: 104, x1: 184, row: 0, align: "left" }]);
    expect(placeLabels([{ px: 630, width: 80 }], BOX)).toEqual([{ x0: 546, x1: 626, row: 0, align: "right" }]);
  });

  it("puts two close markers' labels on either side of their lines, in one row", () => {
    // the valley and the chosen rate 3 px apart: the LR finder's case
    const placed = placeLabels([{ px: 300, width: 90 }, { px: 303, width: 90 }], BOX);
    noOverlap(placed);
    expect(placed.map((p) => [p.row, p.align])).toEqual([[0, "right"], [0, "left"]]);
    expect(placed[0].x1).toBeLessThanOrEqual(300);
    expect(placed[1].x0).toBeGreaterThanOrEqual(303);
  });

  it("drops a label a row when neither side is free, and keeps the input order", () => {
    const items = [{ px: 400, width: 120 }, { px: 300, width: 120 }, { px: 350, width: 120 }];
    const placed = placeLabels(items, BOX);
    noOverlap(placed);
    expect(placed.some((p) => p.row > 0)).toBe(true);
    for (const [i, p] of placed.entries()) {
      // beside its own line
      expect(p.align === "left" ? p.x0 - items[i].px : items[i].px - p.x1).toBe(4);
    }
  });

  it("never overlaps, whatever the markers (random trials), and stays inside the plot", () => {
    let seed = 7;
    const rand = () => ((seed = (seed * 16807) % 2147483647) / 2147483647);
    for (let trial = 0; trial < 200; trial++) {
      const n = 1 + Math.floor(rand() * 6);
      const items = Array.from({ length: n }, () => ({ px: BOX.left + rand() * 600, width: 30 + rand() * 120 }));
      const placed = placeLabels(items, BOX);
      noOverlap(placed);
      for (const p of placed) {
        expect(p.x0).toBeGreaterThanOrEqual(BOX.left);
        expect(p.x1).toBeLessThanOrEqual(BOX.right);
      }
    }
  });

  it("gives a label wider than the plot a row of its own from the left edge", () => {
    const placed = placeLabels([{ px: 300, width: 50 }, { px: 320, width: 900 }], BOX);
    noOverlap(placed);
    expect(placed[1]).toMatchObject({ x0: 50, row: 1 });
  });
});
