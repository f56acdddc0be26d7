// judge-view: the summary, the item list and the item pages of a judge-score run.
// Plain JavaScript, no build step, no network: the data comes in data/index.js and data/items-<k>.js
// (script files, so that the site works opened from disk), written by judge/view/site.py.
"use strict";

const JV = (() => {
  const ROW = 28; // px per list row (style.css .row height)
  const OVERSCAN = 10;
  const state = {
    index: null, // data/index.js
    chunks: new Map(), // k -> items
    waiting: new Map(), // k -> [resolve]
    order: [], // rows shown, in order
    sort: { key: "diff", desc: true }, // disagreements first
    timing: {},
  };
  const $ = (sel) => document.querySelector(sel);

  // ------------------------------------------------------------------ small helpers
  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === "class") node.className = v;
      else if (k === "text") node.textContent = v;
      else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
      else node.setAttribute(k, v === true ? "" : v);
    }
    for (const c of children.flat()) {
      if (c === null || c === undefined) continue;
      node.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return node;
  }
  // replaceChildren with arrays flattened (it takes nodes only).
  const fill = (node, ...children) => node.replaceChildren(...children.flat(Infinity).filter((c) => c !== null && c !== undefined));
  const fmt = (x, d = 3) => (x === null || x === undefined || Number.isNaN(x) ? "–" : x.toFixed(d));
  // A table cell of the summaries (Markdown's `code` and **bold** kept, everything else as text).
  function rich(text) {
    const span = el("span");
    const parts = String(text ?? "").split(/(`[^`]*`|\*\*[^*]*\*\*)/);
    for (const p of parts) {
      if (p.startsWith("`") && p.endsWith("`") && p.length > 1) span.append(el("code", { text: p.slice(1, -1) }));
      else if (p.startsWith("**") && p.endsWith("**") && p.length > 3) span.append(el("b", { text: p.slice(2, -2) }));
      else if (p) span.append(p);
    }
    return span;
  }
  function table(columns, rows, caption) {
    const t = el("table");
    if (caption) t.append(el("caption", { text: caption }));
    if (columns.some((c) => c)) t.append(el("thead", {}, el("tr", {}, columns.map((c) => el("th", {}, rich(c))))));
    t.append(
      el("tbody", {}, rows.map((r) => el("tr", {}, r.map((c) => el("td", { class: typeof c === "number" ? "num" : null }, rich(c))))))
    );
    return t;
  }
  function status(text) {
    $("#status").textContent = text;
  }

  // ------------------------------------------------------------------ data
  function index(data) {
    state.index = data;
    state.timing.indexLoaded = performance.now();
    document.title = data.title;
    $("#title").textContent = data.title;
    const rows = data.rows;
    const n = rows.item.length;
    // |judge - human| per row, once.
    rows.diff = new Array(n);
    for (let i = 0; i < n; i++) {
      const s = rows.score[i], h = rows.human[i];
      rows.diff[i] = s === null || h === null ? null : Math.abs(s - h);
    }
    renderSummary();
    buildFilters();
    window.addEventListener("hashchange", route);
    route();
  }
  function chunk(k, items) {
    state.chunks.set(k, items);
    for (const resolve of state.waiting.get(k) || []) resolve(items);
    state.waiting.delete(k);
  }
  function loadItem(i) {
    const k = Math.floor(i / state.index.chunk);
    const done = (items) => items[i - k * state.index.chunk];
    if (state.chunks.has(k)) return Promise.resolve(done(state.chunks.get(k)));
    return new Promise((resolve, reject) => {
      if (!state.waiting.has(k)) {
        state.waiting.set(k, []);
        const s = el("script", { src: `data/items-${k}.js` });
        s.onerror = () => reject(new Error(`data/items-${k}.js could not be loaded`));
        document.body.append(s);
      }
      state.waiting.get(k).push((items) => resolve(done(items)));
    });
  }

  // ------------------------------------------------------------------ pages
  function show(page) {
    for (const p of ["summary", "items", "item"]) $(`#page-${p}`).hidden = p !== page;
    $("#nav-summary").classList.toggle("active", page === "summary");
    $("#nav-items").classList.toggle("active", page !== "summary");
  }
  function route() {
    const h = location.hash.slice(1);
    if (h.startsWith("item/")) {
      show("item");
      renderItem(Number(h.slice(5)));
    } else if (h === "items") {
      show("items");
      applyFilters();
    } else {
      show("summary");
    }
  }

  function renderSummary() {
    const page = $("#page-summary");
    const s = state.index.summary;
    page.replaceChildren();
    for (const w of s.warnings || []) page.append(el("div", { class: "warning", text: w }));
    for (const sec of s.sections) {
      const box = el("div", { class: "section" }, el("h2", { text: sec.title }));
      for (const note of sec.notes || []) box.append(el("p", { class: "note", text: note }));
      for (const t of sec.tables || []) box.append(table(t.columns, t.rows, t.caption));
      if ((sec.plots || []).length)
        box.append(
          el("div", { class: "plots" }, sec.plots.map((p) => el("figure", {}, el("img", { src: p.src, alt: p.caption }), el("figcaption", { text: p.caption }))))
        );
      page.append(box);
    }
    page.append(el("p", {}, el("a", { href: "#items", text: "The items, disagreements with the annotators first →" })));
    state.timing.summaryRendered = performance.now();
  }

  // ------------------------------------------------------------------ the list
  const COLUMNS = [
    ["id", "item"],
    ["model", "model"],
    ["task", "task"],
    ["criterion", "criterion"],
    ["score", "judge"],
    ["human", "human"],
    ["diff", "|judge - human|"],
    ["width", "interval width"],
    ["reason", "unscorable"],
    ["flags", "flags"],
  ];
  function buildFilters() {
    const ix = state.index;
    const form = $("#filters");
    for (const sel of form.querySelectorAll("select[data-kind]")) {
      const kind = sel.dataset.kind;
      fill(sel, el("option", { value: "", text: "all" }), ix.strings[kind].map((v, i) => el("option", { value: String(i), text: v })));
    }
    const reason = form.elements.reason;
    fill(
      reason,
      el("option", { value: "", text: "all" }),
      el("option", { value: "scored", text: "scored" }),
      el("option", { value: "unscorable", text: "unscorable (any reason)" }),
      ix.strings.reason.map((v, i) => el("option", { value: String(i), text: `unscorable: ${v}` }))
    );
    const flags = $("#flag-filters");
    fill(
      flags,
      Object.keys(ix.flags).map((name) =>
        el("label", {}, `${name} `, el("select", { name: `flag:${name}` }, el("option", { value: "", text: "all" }), el("option", { value: "true", text: "true" }), el("option", { value: "false", text: "false" })))
      )
    );
    form.addEventListener("input", () => applyFilters()); // selects and checkboxes fire "input" too
    form.addEventListener("reset", () => setTimeout(applyFilters, 0));
    form.addEventListener("submit", (e) => e.preventDefault());
    const head = $("#list-head");
    fill(
      head,
      COLUMNS.map(([key, label]) =>
        el("span", {
          "data-key": key,
          class: ["score", "human", "diff", "width"].includes(key) ? "num" : null,
          text: label,
          onclick: () => {
            state.sort = { key, desc: state.sort.key === key ? !state.sort.desc : ["score", "human", "diff", "width"].includes(key) };
            applyFilters();
          },
        })
      )
    );
    $("#list").addEventListener("scroll", () => renderRows());
    window.addEventListener("resize", () => renderRows());
  }

  function readFilters() {
    const f = $("#filters").elements;
    const num = (name) => (f[name].value === "" ? null : Number(f[name].value));
    const flags = {};
    for (const name of Object.keys(state.index.flags)) {
      const v = f[`flag:${name}`].value;
      if (v) flags[name] = v === "true";
    }
    return {
      benchmark: f.benchmark.value === "" ? null : Number(f.benchmark.value),
      model: f.model.value === "" ? null : Number(f.model.value),
      task: f.task.value === "" ? null : Number(f.task.value),
      criterion: f.criterion.value === "" ? null : Number(f.criterion.value),
      reason: f.reason.value,
      scoreMin: num("scoreMin"),
      scoreMax: num("scoreMax"),
      humanMin: num("humanMin"),
      humanMax: num("humanMax"),
      diffMin: num("diffMin"),
      widthMin: num("widthMin"),
      humanOnly: f.humanOnly.checked,
      id: f.id.value.trim().toLowerCase(),
      flags,
    };
  }

  function applyFilters() {
    const t0 = performance.now();
    const ix = state.index, rows = ix.rows, items = ix.items;
    const f = readFilters();
    const n = rows.item.length;
    const out = [];
    for (let r = 0; r < n; r++) {
      const it = rows.item[r];
      if (f.benchmark !== null && items.benchmark[it] !== f.benchmark) continue;
      if (f.model !== null && items.model[it] !== f.model) continue;
      if (f.task !== null && items.task[it] !== f.task) continue;
      if (f.criterion !== null && rows.criterion[r] !== f.criterion) continue;
      const reason = rows.reason[r];
      if (f.reason === "scored" && reason !== -1) continue;
      if (f.reason === "unscorable" && reason === -1) continue;
      if (f.reason !== "" && f.reason !== "scored" && f.reason !== "unscorable" && reason !== Number(f.reason)) continue;
      const s = rows.score[r], h = rows.human[r], d = rows.diff[r], w = rows.width[r];
      if (f.scoreMin !== null && !(s !== null && s >= f.scoreMin)) continue;
      if (f.scoreMax !== null && !(s !== null && s <= f.scoreMax)) continue;
      if (f.humanMin !== null && !(h !== null && h >= f.humanMin)) continue;
      if (f.humanMax !== null && !(h !== null && h <= f.humanMax)) continue;
      if (f.humanOnly && h === null) continue;
      if (f.diffMin !== null && !(d !== null && d >= f.diffMin)) continue;
      if (f.widthMin !== null && !(w !== null && w >= f.widthMin)) continue;
      if (f.id && !items.id[it].toLowerCase().includes(f.id)) continue;
      let ok = true;
      for (const [name, want] of Object.entries(f.flags)) if (ix.flags[name][r] !== want) ok = false;
      if (!ok) continue;
      out.push(r);
    }
    sortRows(out);
    state.order = out;
    const shown = `${out.length.toLocaleString("en")} of ${n.toLocaleString("en")} score records`;
    $("#count").textContent = shown + (state.sort.key === "diff" && state.sort.desc ? ", disagreements with the annotators first" : "");
    $("#list-body").style.height = `${out.length * ROW}px`;
    for (const span of $("#list-head").children) {
      span.classList.toggle("sorted", span.dataset.key === state.sort.key);
      span.classList.toggle("asc", span.dataset.key === state.sort.key && !state.sort.desc);
    }
    renderRows(true);
    state.timing.lastFilterMs = performance.now() - t0;
    state.timing.filtered = performance.now();
    state.timing.filters = (state.timing.filters || 0) + 1;
  }

  function sortKey(key) {
    const ix = state.index, rows = ix.rows, items = ix.items;
    if (key === "id") return (r) => items.id[rows.item[r]];
    if (key === "model") return (r) => ix.strings.model[items.model[rows.item[r]]];
    if (key === "task") return (r) => ix.strings.task[items.task[rows.item[r]]];
    if (key === "criterion") return (r) => ix.strings.criterion[rows.criterion[r]];
    if (key === "reason") return (r) => (rows.reason[r] === -1 ? null : ix.strings.reason[rows.reason[r]]);
    if (key === "flags") return (r) => flagText(r) || null;
    return (r) => rows[key][r];
  }
  function sortRows(out) {
    const key = sortKey(state.sort.key);
    const sign = state.sort.desc ? -1 : 1;
    const vals = new Map(out.map((r) => [r, key(r)]));
    out.sort((a, b) => {
      const x = vals.get(a), y = vals.get(b);
      if (x === y) return a - b;
      if (x === null) return 1; // missing values last, whichever the direction
      if (y === null) return -1;
      return (x < y ? -1 : 1) * sign;
    });
  }
  function flagText(r) {
    const parts = [];
    for (const [name, col] of Object.entries(state.index.flags)) if (col[r] !== null && col[r] !== undefined) parts.push(`${name}=${col[r]}`);
    return parts.join(" ");
  }

  function renderRows(force) {
    const list = $("#list"), body = $("#list-body");
    if ($("#page-items").hidden) return;
    const first = Math.max(0, Math.floor(list.scrollTop / ROW) - OVERSCAN);
    const last = Math.min(state.order.length, Math.ceil((list.scrollTop + list.clientHeight) / ROW) + OVERSCAN);
    if (!force && body.dataset.first === String(first) && body.dataset.last === String(last)) return;
    body.dataset.first = first;
    body.dataset.last = last;
    const ix = state.index, rows = ix.rows, items = ix.items;
    const frag = document.createDocumentFragment();
    for (let k = first; k < last; k++) {
      const r = state.order[k];
      const it = rows.item[r];
      const reason = rows.reason[r] === -1 ? "" : ix.strings.reason[rows.reason[r]];
      const row = el(
        "a",
        { class: "row", href: `#item/${it}`, "data-row": r, "data-item": it },
        el("span", { text: items.id[it], title: items.id[it] }),
        el("span", { text: ix.strings.model[items.model[it]] }),
        el("span", { text: ix.strings.task[items.task[it]] }),
        el("span", { text: ix.strings.criterion[rows.criterion[r]] }),
        el("span", { class: "num", "data-col": "score", text: fmt(rows.score[r]) }),
        el("span", { class: "num", "data-col": "human", text: fmt(rows.human[r]) }),
        el("span", { class: "num", "data-col": "diff", text: fmt(rows.diff[r]) }),
        el("span", { class: "num", "data-col": "width", text: fmt(rows.width[r]) }),
        el("span", { class: reason ? "bad" : null, text: reason, title: reason }),
        el("span", { text: flagText(r) })
      );
      row.style.top = `${k * ROW}px`; // through the CSSOM: the page's CSP refuses style attributes
      frag.append(row);
    }
    body.replaceChildren(frag);
    if (!state.timing.listRendered) state.timing.listRendered = performance.now();
  }

  // ------------------------------------------------------------------ an item
  function contentBlock(title, segs) {
    const box = el("div", { class: "content", "data-part": title.toLowerCase() });
    for (const seg of segs) {
      if (seg.type === "text") box.append(el("p", { text: seg.text }));
      else if (seg.src) box.append(el("figure", {}, el("img", { src: seg.src, alt: seg.name, title: seg.name }), el("figcaption", { text: seg.name })));
      else box.append(el("p", { class: "missing", text: `[image not shown: ${seg.missing}]` }));
    }
    if (!segs.length) box.append(el("p", { class: "note", text: "(empty)" }));
    return [el("h3", { text: title }), box];
  }
  function distChart(dist, argmax) {
    const w = 14, h = 36, ns = "http://www.w3.org/2000/svg";
    const svg = document.createElementNS(ns, "svg");
    svg.setAttribute("class", "dist");
    svg.setAttribute("width", String(dist.length * w));
    svg.setAttribute("height", String(h + 11));
    const peak = Math.max(...dist, 1e-9);
    dist.forEach((p, v) => {
      const bh = Math.max(1, (p / peak) * h);
      const rect = document.createElementNS(ns, "rect");
      rect.setAttribute("x", String(v * w + 1));
      rect.setAttribute("y", String(h - bh));
      rect.setAttribute("width", String(w - 2));
      rect.setAttribute("height", String(bh));
      if (v === argmax) rect.setAttribute("class", "arg");
      const tip = document.createElementNS(ns, "title");
      tip.textContent = `P(${v}) = ${p.toFixed(3)}`;
      rect.append(tip);
      svg.append(rect);
      const label = document.createElementNS(ns, "text");
      label.setAttribute("x", String(v * w + w / 2 - 3));
      label.setAttribute("y", String(h + 10));
      label.textContent = String(v);
      svg.append(label);
    });
    return svg;
  }

  async function renderItem(i) {
    const page = $("#page-item");
    page.replaceChildren(el("p", { text: "loading…" }));
    let item;
    try {
      item = await loadItem(i);
    } catch (e) {
      page.replaceChildren(el("p", { class: "warning", text: String(e) }));
      return;
    }
    if (!item) {
      page.replaceChildren(el("p", { class: "warning", text: `no item ${i}` }));
      return;
    }
    const annotators = Object.keys(item.human || {});
    const parts = [
      el("p", {}, el("a", { class: "back", href: "#items", text: "← items" }), el("a", { href: "#summary", text: "summary" })),
      el("h2", { text: item.id, "data-testid": "item-id" }),
      el("div", { class: "item-meta", text: `model ${item.model} · task ${item.task} · benchmark ${item.benchmark}` + (item.question_id ? ` · question ${item.question_id}` : "") }),
    ];
    if (item.content) {
      parts.push(...contentBlock("Question", item.content.question || []));
      if (item.content.reference) parts.push(...contentBlock("Reference", item.content.reference));
      parts.push(...contentBlock("Response", item.content.response || []));
    } else {
      parts.push(el("p", { class: "warning", text: "The run's input file was not found: the question and response cannot be shown (see the summary's warnings)." }));
    }
    if (item.judge.length) {
      const hasRaw = item.judge.some((j) => j.raw_score !== null && j.raw_score !== undefined);
      const cols = ["criterion", "judge (expected)", ...(hasRaw ? ["raw"] : []), "interval", "distribution", "argmax", ...annotators, "human mean", "|judge - human|", "status", "other fields"];
      const t = el("table", { "data-testid": "judge-scores" }, el("thead", {}, el("tr", {}, cols.map((c) => el("th", { text: c })))));
      const tb = el("tbody");
      for (const j of item.judge) {
        const hm = item.human_mean ? item.human_mean[j.criterion] : undefined;
        const diff = j.score !== null && hm !== undefined && hm !== null ? Math.abs(j.score - hm) : null;
        tb.append(
          el(
            "tr",
            { "data-criterion": j.criterion },
            el("td", {}, el("code", { text: j.criterion })),
            el("td", { class: "num", "data-col": "score", text: fmt(j.score) }),
            hasRaw ? el("td", { class: "num", "data-col": "raw", text: fmt(j.raw_score) }) : null,
            el("td", { class: "num", "data-col": "interval", text: j.interval ? `[${fmt(j.interval[0])}, ${fmt(j.interval[1])}]` : "–" }),
            el("td", {}, j.distribution ? distChart(j.distribution, j.argmax) : "–"),
            el("td", { class: "num", text: j.argmax ?? "–" }),
            annotators.map((a) => el("td", { class: "num", "data-col": `human:${a}`, text: item.human[a][j.criterion] ?? "–" })),
            el("td", { class: "num", "data-col": "human", text: fmt(hm ?? null) }),
            el("td", { class: "num", text: fmt(diff) }),
            el("td", { class: j.status === "ok" ? null : "bad", text: j.status === "ok" ? "ok" : `${j.status}: ${j.reason}` }),
            el("td", { text: Object.entries(j.extra || {}).map(([k, v]) => `${k}=${v}`).join(" ") })
          )
        );
      }
      t.append(tb);
      parts.push(el("h3", { text: "Judge scores" }), t);
      for (const j of item.judge) if (j.rationale) parts.push(el("p", {}, el("b", { text: `judge's rationale (${j.criterion}): ` }), j.rationale));
    }
    if (item.rationale) {
      parts.push(el("h3", { text: "Annotators' rationales" }));
      parts.push(table(["annotator", "rationale"], Object.entries(item.rationale)));
    }
    if (item.metrics.length) {
      parts.push(el("h3", { text: "Rule-based metrics" }));
      parts.push(
        table(
          ["metric", "mode", "score", "status", "details"],
          item.metrics.map((m) => [m.metric, m.mode || "", m.score === null ? "–" : fmt(m.score), m.status === "ok" ? "ok" : `${m.status}: ${m.reason}`, Object.entries(m.details || {}).map(([k, v]) => `${k}=${v}`).join(" ")])
        )
      );
    }
    if (item.audit.length) parts.push(...auditBlock(item));
    page.replaceChildren(...parts);
    window.scrollTo(0, 0);
    state.timing.itemRendered = performance.now();
  }

  function auditBlock(item) {
    const original = item.audit.find((v) => v.version === "original");
    const versions = item.audit.filter((v) => v.version !== "original");
    const crits = item.judge.map((j) => j.criterion);
    const out = [el("h3", { text: "Audit: the same response after one controlled change" })];
    const rows = [];
    for (const v of versions) {
      const cells = crits.map((c) => {
        const a = original && original.scores[c] ? original.scores[c].score : null;
        const b = v.scores[c] ? v.scores[c].score : null;
        return a === null || b === null || a === undefined || b === undefined ? "–" : `${fmt(b)} (${b - a >= 0 ? "+" : ""}${fmt(b - a)})`;
      });
      rows.push([`\`${v.version}\``, ...cells]);
    }
    const base = crits.map((c) => (original && original.scores[c] ? fmt(original.scores[c].score) : "–"));
    out.push(table(["version", ...crits.map((c) => `\`${c}\``)], [["original", ...base], ...rows]));
    for (const v of versions) {
      const d = el("details", { "data-version": v.version }, el("summary", { text: `${v.version}: ${v.description}` }));
      d.append(...contentBlock("Perturbed response", v.response || []));
      out.push(d);
    }
    return out;
  }

  return { index, chunk, state };
})();
window.JV = JV;
