import { describe, expect, it } from "vitest";
import { fmtDuration, fmtInt, fmtRate, fmtStep, fmtValue } from "../../js/shared/format.js";

describe("format", () => {
  it("formats values with four significant digits, small and large ones in exponent form", () => {
    expect(fmtValue(0.123456)).toBe("0.1235");
    expect(fmtValue(1e-5)).toBe("1.00e-5");
    expect(fmtValue(123456)).toBe("1.23e+5");
    expect(fmtValue(0)).toBe("0");
    expect(fmtValue(NaN)).toBe("–");
    expect(fmtValue(null)).toBe("–");
  });

  it("formats counts, rates and durations", () => {
    expect(fmtInt(1234567)).toBe("1,234,567");
    expect(fmtInt(undefined)).toBe("–");
    expect(fmtRate(12.34)).toBe("12.3");
    expect(fmtRate(4321.7)).toBe("4,322");
    expect(fmtDuration(5.25)).toBe("5.3s");
    expect(fmtDuration(0.0349)).toBe("35ms");
    expect(fmtDuration(125)).toBe("2m 05s");
    expect(fmtDuration(3725)).toBe("1h 02m");
    expect(fmtDuration(-1)).toBe("–");
  });

  it("writes compact axis labels for steps", () => {
    expect(fmtStep(950)).toBe("950");
    expect(fmtStep(2500)).toBe("2,500");
    expect(fmtStep(20000)).toBe("20k");
    expect(fmtStep(1500000)).toBe("1.5M");
    expect(fmtStep(0.5)).toBe("0.5");
  });
});
