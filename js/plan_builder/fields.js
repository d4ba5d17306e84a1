// How a plan field is shown and edited: which input, what text a value has, and when a
// field is switched off. Everything comes from the field's description (PlanField),
// so a field the kernel adds gets an input with no change here.

/**
 * @typedef {{path: string, section: string, name: string, label: string, owner: string,
 *   type: string, default: any, required: boolean, nullable: boolean,
 *   choices: any[]|null, custom_allowed: boolean, in_run_id: boolean,
 *   toggle: string|null, bound?: Bound|null}} Field
 * @typedef {{low: number|null, high: number|null, low_open: boolean, high_open: boolean,
 *   form_high: number|null, form_items: number|null, text: string}} Bound
 *   a numeric field's range: any run's (`text`), and the form's own limits
 */

/** "checkbox", "select" (a closed set of values) or "text" (typed, checked by the kernel). */
export function inputKind(field) {
  if (field.type === "bool") return "checkbox";
  if (Array.isArray(field.choices) && field.choices.length) return "select";
  return "text";
}

/** The text a value has in a text field. */
export function valueText(field, value) {
  if (value === null || value === undefined) return "";
  if (Array.isArray(value)) return field.type === "int_list" ? value.join(", ") : JSON.stringify(value);
  if (typeof value === "object") return JSON.stringify(value);
  return String(value);
}

/** A select option's value for a choice (null included) and back. */
export function choiceKey(choice) {
  return JSON.stringify(choice ?? null);
}

export function choiceLabel(choice) {
  return choice === null || choice === undefined ? "(none)" : String(choice);
}

/** What a field's placeholder says: its default, or that it is required. */
export function placeholder(field) {
  if (field.required) return "required";
  if (field.default === null || field.default === undefined) return field.nullable ? "none" : "";
  return `default ${valueText(field, field.default)}`;
}

/** Whether a field is switched off by its section's toggle (scheduler, early stopping). */
export function isOff(field, values) {
  return Boolean(field.toggle) && !values[field.toggle];
}

/** A limit as the kernel's refusals write it: 100,000 or 3.4e38. */
export function limitText(n) {
  if (Number.isInteger(n) && Math.abs(n) < 1e16) return n.toLocaleString("en-US");
  return Number(n.toPrecision(2)).toString().replace("e+", "e");
}

/** A numeric field's range in words: what any run takes, then this form's own limits. */
export function boundText(field) {
  const b = field.bound;
  if (!b) return "";
  const parts = [b.text];
  if (b.form_high !== null && b.form_high !== undefined) parts.push(`at most ${limitText(b.form_high)} in this form`);
  if (b.form_items) parts.push(`at most ${b.form_items} items in this form`);
  return parts.join("; ");
}

/** The tooltip of a field: where it lives, whether it changes the run id, its range. */
export function fieldTitle(field) {
  const id = field.in_run_id ? "changes the run id" : "does not change the run id";
  const range = boundText(field);
  return `${field.path} (${field.owner}); ${id}${range ? `; ${range}` : ""}`;
}

/** Short text of a value for a branch's list of changes. */
export function shortValue(value) {
  const text = typeof value === "string" ? value : JSON.stringify(value);
  return text.length > 24 ? `${text.slice(0, 21)}…` : text;
}
