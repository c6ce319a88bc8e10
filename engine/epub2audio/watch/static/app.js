// The watcher's page: the queue comes from /api/events (server-sent events), every change goes
// through the watcher's own queue with a POST that carries the X-Epub2audio header.
"use strict";
const $ = (id) => document.getElementById(id);
const WRITE = { "X-Epub2audio": "1" };
let shown = null;     // the book whose details are open
let books = [];

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "onclick") node.onclick = v; else node.setAttribute(k, v);
  }
  for (const c of children) node.append(c);
  return node;
}

function clock(seconds) {
  if (seconds == null) return "";
  seconds = Math.round(seconds);
  const h = Math.floor(seconds / 3600), m = Math.floor(seconds / 60) % 60, s = seconds % 60;
  return (h ? `${h}:${String(m).padStart(2, "0")}` : `${m}`) + `:${String(s).padStart(2, "0")}`;
}

async function post(url, body, headers = {}) {
  const response = await fetch(url, { method: "POST", headers: { ...WRITE, ...headers }, body });
  const answer = response.headers.get("content-type")?.includes("json") ? await response.json() : {};
  if (!response.ok) throw new Error(answer.error || `${response.status} ${response.statusText}`);
  return answer;
}

// ---- dropping books ------------------------------------------------------------------------
async function upload(file) {
  const line = el("li", {}, `${file.name}: sending…`);
  $("uploads").append(line);
  try {
    const answer = await post("/api/upload", file, { "X-Epub2audio-Name": encodeURIComponent(file.name) });
    line.textContent = `${file.name}: in the folder as ${answer.name}; the watcher queues it when it has settled`;
  } catch (error) {
    line.textContent = `${file.name}: ${error.message}`;
    line.className = "error";
  }
}

function setupDrop() {
  const zone = $("drop");
  for (const name of ["dragenter", "dragover"]) {
    document.addEventListener(name, (e) => { e.preventDefault(); zone.classList.add("over"); });
  }
  document.addEventListener("dragleave", (e) => { if (!e.relatedTarget) zone.classList.remove("over"); });
  document.addEventListener("drop", (e) => {
    e.preventDefault();
    zone.classList.remove("over");
    for (const file of e.dataTransfer.files) upload(file);
  });
  $("pick").addEventListener("change", (e) => { for (const file of e.target.files) upload(file); e.target.value = ""; });
}

// ---- the queue -------------------------------------------------------------------------------
function progressCell(book) {
  const live = book.live || {};
  if (book.state === "converting" || book.state === "cancelling") {
    const cell = el("td");
    if (live.total) {
      cell.append(el("progress", { max: live.total, value: live.done || 0 }));
      cell.append(` ${live.done || 0}/${live.total}`);
    } else {
      cell.append(live.stage || "starting");
    }
    const bits = [];
    if (live.stage && live.stage !== "render") bits.push(live.stage);
    if (live.chapter_title) bits.push(`read: ${live.chapter_title}`);
    if (live.eta_seconds) bits.push(`about ${clock(live.eta_seconds)} left`);
    if (bits.length) cell.append(el("div", { class: "muted" }, bits.join(" · ")));
    for (const w of (live.warnings || []).slice(-3)) cell.append(el("div", { class: "error" }, w));
    return cell;
  }
  if (book.error) return el("td", { class: "error" }, book.error);
  return el("td");
}

function actions(book) {
  const cell = el("td");
  const act = (label, fn) => cell.append(el("button", { "data-action": label.toLowerCase(), onclick: fn }, label), " ");
  if (["queued", "converting"].includes(book.state)) {
    act("Cancel", () => post(`/api/books/${book.id}/cancel`).catch((e) => alert(e.message)));
  }
  if (["failed", "cancelled"].includes(book.state)) {
    act("Retry", () => post(`/api/books/${book.id}/retry`).catch((e) => alert(e.message)));
  }
  act(book.state === "done" ? "Listen" : "Plan", () => openDetails(book.id));
  return cell;
}

function renderQueue() {
  const body = $("queue").querySelector("tbody");
  body.replaceChildren(...books.map((book) => el("tr", { "data-id": book.id, "data-state": book.state },
    el("td", {}, book.name, el("div", { class: "muted" }, book.output ? `→ ${book.output}` : "")),
    el("td", { class: `state state-${book.state}` }, book.state),
    progressCell(book), actions(book))));
  $("queue").hidden = books.length === 0;
  $("empty").hidden = books.length !== 0;
  if (shown) {
    const book = books.find((b) => b.id === shown);
    if (book) showPlayer(book);
  }
}

function listen() {
  const source = new EventSource("/api/events");
  source.addEventListener("state", (e) => {
    books = JSON.parse(e.data).books;
    $("connection").textContent = "live";
    renderQueue();
  });
  source.onerror = () => { $("connection").textContent = "reconnecting…"; };
}

// ---- before and after ------------------------------------------------------------------------
function showPlayer(book) {
  const files = book.files || {};
  $("player").hidden = !files.audio;
  if (files.audio && $("audio").dataset.src !== files.audio) {
    $("audio").dataset.src = files.audio;
    $("audio").src = files.audio;
  }
  const names = { audio: "audiobook", readalong: "read-along book", srt: "subtitles (SRT)", vtt: "subtitles (VTT)" };
  $("downloads").replaceChildren(...Object.entries(files).flatMap(([kind, url]) =>
    [el("a", { href: url, download: "" }, `Download the ${names[kind] || kind}`), " "]));
}

async function openDetails(id) {
  shown = id;
  const book = books.find((b) => b.id === id);
  $("details").hidden = false;
  $("details-title").textContent = book ? book.name : "";
  if (book) showPlayer(book);
  $("plan").replaceChildren(el("p", { class: "muted" }, "reading the book…"));
  const response = await fetch(`/api/books/${id}/plan`);
  const plan = await response.json();
  if (!response.ok) { $("plan").replaceChildren(el("p", { class: "error" }, plan.error)); return; }
  const rows = plan.chapters.map((c) => el("tr", {}, el("td", {}, String(c.number)), el("td", {}, c.title),
    el("td", {}, c.characters.toLocaleString()), el("td", {}, clock(c.estimated_seconds)),
    el("td", { class: "muted preview" }, c.preview ? `“${c.preview}”` : "")));
  const parts = [el("p", {}, `${plan.title} — ${(plan.authors || []).join(", ") || "unknown author"}`
                          + (plan.language ? ` [${plan.language}]` : "")),
    el("table", { id: "chapters" }, el("thead", {}, el("tr", {}, el("th", {}, "#"), el("th", {}, "Chapter"),
      el("th", {}, "Characters"), el("th", {}, "About"), el("th", {}, "Begins"))), el("tbody", {}, ...rows))];
  if (plan.skipping && plan.skipping.summary) parts.push(el("p", { class: "muted" }, plan.skipping.summary));
  if (plan.skipped.length) {
    parts.push(el("h3", {}, "Skipped"), el("ul", { id: "skipped" }, ...plan.skipped.map((s) =>
      el("li", {}, `${s.title}: ${s.reason}, ${s.characters.toLocaleString()} characters`,
        ...(s.preview ? [el("div", { class: "muted preview" }, `“${s.preview}”`)] : [])))));
  }
  if (plan.warnings.length) {
    parts.push(el("h3", {}, "Warnings"), el("ul", {}, ...plan.warnings.map((w) => el("li", { class: "error" }, w))));
  }
  $("plan").replaceChildren(...parts);
}

// ---- voices ----------------------------------------------------------------------------------
async function loadVoices() {
  const answer = await (await fetch("/api/voices")).json();
  const select = $("voice");
  select.replaceChildren(...answer.voices.map((v) => el("option", { value: v.name }, v.name)));
  if (answer.current && answer.voices.some((v) => v.name === answer.current)) select.value = answer.current;
  const about = () => {
    const v = answer.voices.find((x) => x.name === select.value);
    $("voice-about").textContent = v ? `${v.family}; ${v.languages.join(", ") || "any language"}; ${v.about}` : "";
  };
  select.onchange = about;
  about();
}

async function tryVoice() {
  $("try-state").textContent = "speaking…";
  $("try").disabled = true;
  try {
    const response = await fetch("/api/voices/try", {
      method: "POST", headers: { ...WRITE, "Content-Type": "application/json" },
      body: JSON.stringify({ voice: $("voice").value, text: $("try-text").value }),
    });
    if (!response.ok) throw new Error((await response.json()).error);
    const player = $("try-audio");
    if (player.src) URL.revokeObjectURL(player.src);
    player.src = URL.createObjectURL(await response.blob());
    player.hidden = false;
    $("try-state").textContent = "";
    await player.play();
  } catch (error) {
    $("try-state").textContent = error.message;
  } finally {
    $("try").disabled = false;
  }
}

setupDrop();
listen();
loadVoices();
$("try").onclick = tryVoice;
