// The runs panel's client of nnx_lab.server's REST API (docs/lab_extension.md).
// `request(path, init)` does the HTTP (JupyterLab's ServerConnection in the extension,
// a fake in tests) and returns the parsed JSON, or throws an ApiError.

export class ApiError extends Error {
  /** @param {number} status @param {string} message */
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

/** @typedef {(path: string, init?: {method?: string, body?: string, download?: boolean}) => Promise<any>} Request */
// `download: true`: the answer is a file, {blob, filename} (the filename from the
// server's Content-Disposition), not JSON.

export class RunsApi {
  /** @param {Request} request */
  constructor(request) {
    this.request = request;
  }

  /** Every run the server found. `refresh`: search the roots again first. */
  listRuns({ refresh = false } = {}) {
    return this.request(refresh ? "runs?refresh=1" : "runs");
  }

  run(folder, runId) {
    return this.request(`runs/${enc(folder)}/${enc(runId)}`);
  }

  /** A page of the run's log from a byte offset. */
  log(folder, runId, offset, { maxBytes, inLine = false } = {}) {
    const q = [`offset=${Math.max(0, Math.floor(offset))}`];
    if (maxBytes) q.push(`max_bytes=${Math.floor(maxBytes)}`);
    if (inLine) q.push("in_line=1");
    return this.request(`runs/${enc(folder)}/${enc(runId)}/log?${q.join("&")}`);
  }

  stop(folder, runId, reason = "stopped from the JupyterLab runs panel") {
    return this.request(`runs/${enc(folder)}/${enc(runId)}/stop`, { method: "POST", body: JSON.stringify({ reason }) });
  }

  /** Give a run a new name (an empty one removes it); the server answers {name}. */
  rename(folder, runId, name) {
    return this.request(`runs/${enc(folder)}/${enc(runId)}/name`, { method: "PUT", body: JSON.stringify({ name }) });
  }

  /** The run's one-file HTML report: {filename, html} (the server writes nothing). */
  report(folder, runId) {
    return this.request(`runs/${enc(folder)}/${enc(runId)}/report`);
  }

  /** The run's bundle, one zip the server builds in a subprocess: {blob, filename}.
   * `checkpoint`: "last" or "best". */
  exportBundle(folder, runId, checkpoint = "last") {
    return this.request(`runs/${enc(folder)}/${enc(runId)}/bundle`, { method: "POST", body: JSON.stringify({ checkpoint }), download: true });
  }

  /** @param {{folder: string, runId: string}[]} runs */
  compare(runs) {
    return this.request(`compare?${runs.map((r) => `run=${enc(`${r.folder}/${r.runId}`)}`).join("&")}`);
  }
}

/** The file name a Content-Disposition header gives (RFC 6266: filename* first). */
export function dispositionName(header, fallback) {
  const text = String(header || "");
  const star = /filename\*=UTF-8''([^;]+)/i.exec(text);
  if (star) {
    try {
      return decodeURIComponent(star[1].trim());
    } catch {
      // a malformed escape: the plain name below
    }
  }
  const plain = /filename="([^"]*)"/i.exec(text) || /filename=([^;]+)/i.exec(text);
  return plain ? plain[1].trim() : fallback;
}

function enc(text) {
  return encodeURIComponent(String(text));
}
