// The search console: calls the public API with the bearer token kept in this tab's session
// storage. Mail is untrusted: every value is set with textContent; only the API's exact
// <mark>/</mark> highlight markers become elements (marked() below); no mail is parsed as HTML.
"use strict";

const TOKEN_KEY = "sidecar-console-token";
const MAILBOX_KEY = "sidecar-console-mailbox";
const $ = (id) => document.getElementById(id);
const state = { mailbox: "", params: null, cursors: [null], page: 0, ticket: 0, done: 0,
  typing: null, inflight: null, contacts: { timer: null, inflight: null, ticket: 0 } };
const TYPING_MS = 300; // results follow the query box this long after the last keystroke
const CONTACTS_MS = 120;
// An address operator being typed at the caret: from:/to:/cc: (or -from: …) and its value.
const ADDRESS_AT_CARET = /(^|[\s(])(-?)(from|to|cc):([^\s"()]*)$/i;

class ApiError extends Error {}

// Snippets come HTML-escaped by OpenSearch's encoder (& < > " ' /): its entities become
// characters again, which are then set as text.
const ENTITIES = { amp: "&", lt: "<", gt: ">", quot: '"' };
function decodeEntities(text) {
  return text.replace(/&(amp|lt|gt|quot|#x[0-9a-fA-F]+|#[0-9]+);/g, (whole, name) => {
    if (name[0] !== "#") return ENTITIES[name];
    const code = name[1] === "x" ? parseInt(name.slice(2), 16) : parseInt(name.slice(1), 10);
    return code <= 0x10ffff ? String.fromCodePoint(code) : whole;
  });
}

// A snippet with the API's exact highlight markers as <mark> elements; all else stays text.
function marked(text) {
  const out = document.createDocumentFragment();
  let open = false;
  for (const part of String(text).split(/(<mark>|<\/mark>)/)) {
    if (part === "<mark>" || part === "</mark>") {
      open = part === "<mark>";
    } else if (part && open) {
      const mark = document.createElement("mark");
      mark.textContent = decodeEntities(part);
      out.append(mark);
    } else if (part) {
      out.append(document.createTextNode(decodeEntities(part)));
    }
  }
  return out;
}

// The API's own message for a failed answer (detail, parse position, parameter errors).
function describe(response, body) {
  let text = `${response.status} ${response.statusText}`.trim();
  if (body && typeof body.detail === "string") text += `: ${body.detail}`;
  if (body && Number.isInteger(body.position)) text += ` (at position ${body.position})`;
  if (body && Array.isArray(body.errors)) {
    text += ` (${body.errors.map((e) => `${(e.loc || []).join(".")}: ${e.msg}`).join("; ")})`;
  }
  const retry = response.headers.get("Retry-After");
  if (retry) text += ` (retry after ${retry} s)`;
  return text;
}

async function api(path, params, signal) {
  const started = performance.now();
  let response;
  try {
    response = await fetch(`${path}?${new URLSearchParams(params)}`, {
      headers: { Authorization: `Bearer ${sessionStorage.getItem(TOKEN_KEY)}` },
      cache: "no-store",
      credentials: "omit",
      signal,
    });
  } catch (err) {
    throw new ApiError(`the API did not answer (${err.message})`);
  }
  const body = await response.json().catch(() => null);
  if (response.status === 401) forgetToken("The API refused the token (401): type it again.");
  if (!response.ok) throw new ApiError(describe(response, body));
  return { body, ms: Math.round(performance.now() - started) };
}

// The mailbox of the current search (editing the box takes effect at the next search).
function mailboxPath() {
  return `/v1/mailboxes/${encodeURIComponent(state.mailbox)}`;
}

function text(el, value) {
  el.textContent = value == null ? "" : String(value);
  return el;
}

// "2025-03-03 09:12 UTC" from the message's date (or its timestamp when it has none).
function when(hit) {
  const date = hit.date ? new Date(hit.date) : new Date((hit.ts || 0) * 1000);
  if (Number.isNaN(date.getTime())) return String(hit.date);
  return `${date.toISOString().slice(0, 16).replace("T", " ")} UTC`;
}

function fill(node, hit) {
  const highlights = hit.highlights || {};
  const subject = node.querySelector(".subject");
  if (highlights.subject && highlights.subject.length) subject.append(marked(highlights.subject[0]));
  else text(subject, hit.subject || "(no subject)");
  const from = hit.from || {};
  text(node.querySelector(".from"), from.name ? `${from.name} <${from.email}>` : from.email);
  const date = node.querySelector(".date");
  text(date, when(hit));
  date.dateTime = hit.date || "";
  const size = hit.thread_messages;
  let thread = size == null ? "" : `thread of ${size}`;
  if (hit.thread_hits != null) thread = `${hit.thread_hits} matching · ${thread}`;
  text(node.querySelector(".thread"), thread);
  const attachments = hit.attachment_count || 0;
  text(node.querySelector(".attachments"), attachments ? `📎 ${attachments}` : "");
  text(node.querySelector(".score"), `score ${Number(hit.score).toFixed(3)}`);
  const snippets = node.querySelector(".snippets");
  for (const fragment of highlights.clean || []) {
    snippets.appendChild(document.createElement("li")).append(marked(fragment));
  }
  if (!snippets.children.length && hit.forai) {
    text(snippets.appendChild(document.createElement("li")), hit.forai.slice(0, 240));
  }
}

function renderHit(hit) {
  const node = $("hit").content.firstElementChild.cloneNode(true);
  node.dataset.key = hit.message_key;
  fill(node, hit);
  node.querySelector(".similar").addEventListener("click", () => toggleSimilar(node));
  node.querySelector(".exclude").addEventListener("change", () => loadSimilar(node));
  node.querySelector(".in-thread").addEventListener("click", () => {
    $("q").value = `thread:${hit.thread_key}`;
    $("search").requestSubmit();
  });
  return node;
}

function toggleSimilar(node) {
  const panel = node.querySelector(".related");
  panel.hidden = !panel.hidden;
  if (!panel.hidden) loadSimilar(node);
}

function relatedHit(hit) {
  const item = document.createElement("li");
  item.className = "related-hit";
  item.dataset.key = hit.message_key;
  item.dataset.thread = hit.thread_key;
  const from = hit.from || {};
  text(item.appendChild(document.createElement("span")), hit.subject || "(no subject)");
  text(item.appendChild(document.createElement("small")), ` ${from.name || from.email} · ${when(hit)}`);
  return item;
}

async function loadSimilar(node) {
  const list = node.querySelector(".related-hits");
  const error = node.querySelector(".related-error");
  list.replaceChildren();
  error.hidden = true;
  const params = { limit: 5, exclude_thread: node.querySelector(".exclude").checked };
  try {
    const { body } = await api(`${mailboxPath()}/messages/${node.dataset.key}/similar`, params);
    list.append(...body.hits.map(relatedHit));
    if (!body.hits.length) text(list.appendChild(document.createElement("li")), "nothing similar");
  } catch (err) {
    text(error, err.message).hidden = false;
  }
  finished();
}

function showError(message) {
  $("did-you-mean").hidden = true;
  $("hits").replaceChildren();
  $("pager").hidden = true;
  text($("status"), "");
  text($("error"), message).hidden = false;
}

// "Did you mean": the API's corrected query (words of this mailbox only), one click away.
function suggest(didYouMean) {
  const box = $("did-you-mean");
  box.hidden = !didYouMean;
  if (!didYouMean) return;
  text($("dym-link"), didYouMean.q);
  text($("dym-hits"), ` (${didYouMean.hits} hit${didYouMean.hits === 1 ? "" : "s"})`);
}

async function run(typed = false) {
  const params = { ...state.params };
  const cursor = state.cursors[state.page];
  if (cursor) params.cursor = cursor;
  const ticket = ++state.ticket;
  if (state.inflight) state.inflight.abort(); // a stale search's answer is never waited for
  const inflight = (state.inflight = new AbortController());
  $("error").hidden = true;
  try {
    const { body, ms } = await api(`${mailboxPath()}/search`, params, inflight.signal);
    if (ticket !== state.ticket) return; // a later search has been sent: its answer counts
    if (!cursor) suggest(body.did_you_mean);
    $("hits").replaceChildren(...body.hits.map(renderHit));
    $("hits").start = state.page * Number(params.limit) + 1;
    const more = body.next_cursor ? ", more on the next page" : "";
    text($("status"), `${body.hits.length} hit(s) on page ${state.page + 1}${more} · ${ms} ms · ${params.mode}`);
    state.cursors[state.page + 1] = body.next_cursor;
    $("pager").hidden = !(state.page > 0 || body.next_cursor);
    $("prev").disabled = state.page === 0;
    $("next").disabled = !body.next_cursor;
    text($("page"), `page ${state.page + 1}`);
  } catch (err) {
    if (ticket !== state.ticket) return; // cancelled or overtaken: nothing to show
    // A query still being typed ("from:", an open quote) is not an error yet.
    if (typed && err.message.startsWith("400")) text($("status"), `… ${err.message}`);
    else showError(err.message);
  }
  finished();
}

// A counter of answered requests, for the browser tests to wait on.
function finished() {
  state.done += 1;
  $("app").dataset.done = String(state.done);
}

function search(event) {
  event.preventDefault();
  clearTimeout(state.typing);
  hideContacts();
  startSearch(false);
}

function startSearch(typed) {
  state.mailbox = $("mailbox").value.trim();
  sessionStorage.setItem(MAILBOX_KEY, state.mailbox);
  state.params = {
    q: $("q").value,
    mode: document.querySelector("input[name=mode]:checked").value,
    sort: $("sort").value,
    limit: $("limit").value,
  };
  if ($("collapse").checked) state.params.collapse = "thread";
  state.cursors = [null];
  state.page = 0;
  run(typed);
}

// Results follow the query box: a search once typing pauses (TYPING_MS), the one before
// it cancelled.
function typed() {
  clearTimeout(state.typing);
  offerContacts();
  if (!$("q").value.trim() || !$("mailbox").value.trim()) return;
  state.typing = setTimeout(() => startSearch(true), TYPING_MS);
}

// Contact suggestions for the from:/to:/cc: value at the caret (the mailbox's own
// correspondents, GET …/contacts), the stale request cancelled.
function offerContacts() {
  const box = $("q");
  const before = box.value.slice(0, box.selectionStart ?? box.value.length);
  const found = ADDRESS_AT_CARET.exec(before);
  const contacts = state.contacts;
  clearTimeout(contacts.timer);
  if (!found || !found[4] || !$("mailbox").value.trim()) {
    hideContacts();
    return;
  }
  const prefix = found[4];
  contacts.timer = setTimeout(async () => {
    const ticket = ++contacts.ticket;
    if (contacts.inflight) contacts.inflight.abort();
    const inflight = (contacts.inflight = new AbortController());
    const path = `/v1/mailboxes/${encodeURIComponent($("mailbox").value.trim())}/contacts`;
    try {
      const { body } = await api(path, { prefix, limit: 8 }, inflight.signal);
      if (ticket !== contacts.ticket) return;
      showContacts(body.contacts, before.length - prefix.length);
    } catch (err) {
      if (ticket === contacts.ticket) hideContacts();
    }
  }, CONTACTS_MS);
}

function showContacts(list, start) {
  const menu = $("contacts");
  menu.replaceChildren(...list.map((contact) => {
    const item = document.createElement("li");
    item.className = "contact";
    item.dataset.email = contact.email;
    text(item.appendChild(document.createElement("span")), contact.email);
    const about = contact.name ? `${contact.name} · ` : "";
    text(item.appendChild(document.createElement("small")), ` ${about}${contact.messages} msg`);
    item.addEventListener("mousedown", (event) => {
      event.preventDefault(); // the query box keeps the focus
      choose(contact.email, start);
    });
    return item;
  }));
  menu.hidden = !list.length;
  menu.dataset.shown = String(Number(menu.dataset.shown || 0) + 1); // for the browser tests
}

function hideContacts() {
  clearTimeout(state.contacts.timer);
  state.contacts.ticket += 1;
  $("contacts").hidden = true;
}

// The chosen address replaces the value being typed; the search follows at once.
function choose(email, start) {
  const box = $("q");
  const end = box.selectionStart ?? box.value.length;
  const rest = box.value.slice(end).replace(/^[^\s"()]*/, "");
  box.value = `${box.value.slice(0, start)}${email} ${rest.trimStart()}`;
  const caret = start + email.length + 1;
  box.setSelectionRange(caret, caret);
  hideContacts();
  $("search").requestSubmit();
}

function page(step) {
  state.page += step;
  run();
}

function forgetToken(message) {
  sessionStorage.removeItem(TOKEN_KEY);
  text($("login-error"), message).hidden = !message;
  show();
}

function show() {
  const known = Boolean(sessionStorage.getItem(TOKEN_KEY));
  $("login").hidden = known;
  $("forget").hidden = !known;
  $("app").hidden = !known;
  (known ? $("q") : $("token")).focus();
}

function start() {
  const wanted = new URLSearchParams(location.search).get("mailbox");
  $("mailbox").value = wanted || sessionStorage.getItem(MAILBOX_KEY) || "";
  $("login").addEventListener("submit", (event) => {
    event.preventDefault();
    sessionStorage.setItem(TOKEN_KEY, $("token").value.trim());
    $("token").value = "";
    $("login-error").hidden = true;
    show();
  });
  $("forget").addEventListener("click", () => forgetToken(""));
  $("search").addEventListener("submit", search);
  $("q").addEventListener("input", typed);
  $("q").addEventListener("blur", hideContacts);
  $("q").addEventListener("keydown", (event) => {
    if (event.key === "Escape") hideContacts();
  });
  $("dym-link").addEventListener("click", (event) => {
    event.preventDefault();
    $("q").value = $("dym-link").textContent;
    $("search").requestSubmit();
  });
  for (const input of document.querySelectorAll("input[name=mode], #collapse, #sort, #limit")) {
    input.addEventListener("change", () => state.params && $("search").requestSubmit());
  }
  $("prev").addEventListener("click", () => page(-1));
  $("next").addEventListener("click", () => page(1));
  for (const code of $("examples").querySelectorAll("td:first-child code")) {
    code.addEventListener("click", () => {
      $("q").value = code.textContent;
      $("q").focus();
    });
  }
  show();
}

document.addEventListener("DOMContentLoaded", start);
