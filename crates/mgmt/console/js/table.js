// Lists paged, sorted and filtered by the broker (RabbitMQ's page, page_size, sort,
// sort_reverse, name, use_regex): the page holds at most one page of rows, whatever the
// number of queues, so 10,000 queues cost the browser what 50 do.
//
// Keyboard: sort buttons in the headers (aria-sort tells the order), links in the rows,
// Up/Down move between rows' links, the pager's buttons and fields.

import { h, fill, uid, select } from './dom.js';
import { query } from './api.js';
import { count } from './format.js';

const PAGE_SIZES = [20, 50, 100, 200, 500];
const DEBOUNCE_MS = 300;

export class PagedTable {
  /**
   * id: remembers the table's state (page, sort, filter) in sessionStorage;
   * label: the table's accessible name; path: the API list path;
   * columns: [{label, sort?: API field, num?: bool, cell: item → content, title?}];
   * fields: the API `columns` to ask for (smaller replies); key: item → row identity;
   * onChange: run a refresh now (the app's, so refreshes never overlap);
   * params: extra query parameters; noun: "queues", for the counts.
   */
  constructor({ id, label, path, columns, fields, key, onChange, params = {}, noun = 'items', filter = true, sort = 'name' }) {
    this.id = id;
    this.path = path;
    this.columns = columns;
    this.fields = fields;
    this.key = key;
    this.onChange = onChange;
    this.params = params;
    this.noun = noun;
    const saved = JSON.parse(sessionStorage.getItem(`ferry.table.${id}`) || 'null');
    this.state = { page: 1, size: 50, sort, reverse: false, name: '', regex: false, ...saved };
    this.result = null;

    this.summary = h('p', { class: 'summary', 'aria-live': 'polite' });
    this.thead = h('thead');
    this.tbody = h('tbody');
    this.tbody.addEventListener('keydown', (ev) => this.arrowKeys(ev));
    const caption = h('caption', { class: 'sr-only' }, label);
    this.table = h('table', { class: 'data', 'aria-label': label, id: `table-${id}` }, caption, this.thead, this.tbody);
    this.pager = h('nav', { class: 'pager', 'aria-label': `${label} pages` });
    const toolbar = h('div', { class: 'toolbar' }, filter ? this.filterControls() : null, this.summary);
    this.el = h('div', { class: 'paged' }, toolbar, h('div', { class: 'scroll' }, this.table), this.pager);
    this.renderHead();
  }

  save() {
    sessionStorage.setItem(`ferry.table.${this.id}`, JSON.stringify(this.state));
  }

  change(patch) {
    Object.assign(this.state, patch);
    this.save();
    this.renderHead();
    this.onChange();
  }

  filterControls() {
    const input = h('input', {
      type: 'search', id: uid('filter'), value: this.state.name, placeholder: 'Filter by name',
      autocomplete: 'off', spellcheck: 'false', class: 'filter',
    });
    let timer = null;
    // Typing waits for a pause before asking the broker, and each new request replaces the
    // one in flight (the app aborts it), so a fast typist costs one request.
    input.addEventListener('input', () => {
      clearTimeout(timer);
      timer = setTimeout(() => this.change({ name: input.value, page: 1 }), DEBOUNCE_MS);
    });
    const regex = h('input', { type: 'checkbox', id: uid('re'), checked: this.state.regex });
    regex.addEventListener('change', () => this.change({ regex: regex.checked, page: 1 }));
    return h(
      'div',
      { class: 'filters', role: 'search' },
      h('label', { for: input.id, class: 'sr-only' }, `Filter ${this.noun} by name`),
      input,
      h('span', { class: 'check' }, regex, h('label', { for: regex.id }, 'Regex')),
    );
  }

  renderHead() {
    const { sort, reverse } = this.state;
    // A sort button pressed from the keyboard keeps the focus through the redraw.
    const focused = this.thead.contains(document.activeElement)
      ? [...this.thead.querySelectorAll('th')].indexOf(document.activeElement.closest('th'))
      : -1;
    fill(
      this.thead,
      h(
        'tr',
        null,
        this.columns.map((c) => {
          const active = c.sort && c.sort === sort;
          const order = active ? (reverse ? 'descending' : 'ascending') : 'none';
          const th = h('th', { scope: 'col', class: [c.num && 'num', c.cls], title: c.title, 'aria-sort': c.sort ? order : undefined });
          if (!c.sort) return fill(th, c.label);
          const arrow = active ? (reverse ? '▼' : '▲') : '↕';
          return fill(
            th,
            h(
              'button',
              {
                type: 'button',
                class: ['sort', active && 'active'],
                onclick: () => this.change(active ? { reverse: !reverse, page: 1 } : { sort: c.sort, reverse: !!c.num, page: 1 }),
              },
              c.label,
              h('span', { class: 'arrow', 'aria-hidden': 'true' }, arrow),
            ),
          );
        }),
      ),
    );
    if (focused >= 0) this.thead.querySelectorAll('th')[focused]?.querySelector('button')?.focus();
  }

  url() {
    const { page, size, sort, reverse, name, regex } = this.state;
    return (
      this.path +
      query({
        page,
        page_size: size,
        sort,
        sort_reverse: reverse ? 'true' : undefined,
        name,
        use_regex: name && regex ? 'true' : undefined,
        columns: this.fields ? this.fields.join(',') : undefined,
        ...this.params,
      })
    );
  }

  /** Fetches and shows the current page; `api` is the app's call with its signal. */
  async refresh(api) {
    let result;
    try {
      result = await api(this.url());
    } catch (e) {
      // A page past the end (the list shrank, or a bad bookmark): go to the first.
      if (e.status === 400 && this.state.page > 1 && /out of range/.test(e.message)) {
        this.state.page = 1;
        result = await api(this.url());
      } else if (e.status === 400 && this.state.regex) {
        this.showError(e.message);
        return;
      } else {
        throw e;
      }
    }
    if (result.page_count > 0 && this.state.page > result.page_count) {
      this.state.page = result.page_count;
      result = await api(this.url());
    }
    this.result = result;
    this.save();
    this.render();
  }

  showError(message) {
    fill(this.summary, h('span', { class: 'error-text' }, message));
  }

  render() {
    const r = this.result;
    // Keep keyboard focus on the same row's link across refreshes.
    const focused = document.activeElement;
    const focusKey = focused && this.tbody.contains(focused) ? focused.closest('tr')?.dataset.key : null;
    const focusCol = focusKey ? [...focused.closest('tr').children].indexOf(focused.closest('td')) : -1;

    const rows = document.createDocumentFragment();
    for (const item of r.items) {
      const k = this.key(item);
      rows.append(
        h(
          'tr',
          { dataset: { key: k } },
          this.columns.map((c) => h('td', { class: [c.num && 'num', c.cls] }, c.cell(item))),
        ),
      );
    }
    if (!r.items.length) {
      const text = r.total_count === 0 ? `No ${this.noun}.` : `No ${this.noun} match the filter.`;
      rows.append(h('tr', null, h('td', { colspan: this.columns.length, class: 'empty' }, text)));
    }
    this.tbody.replaceChildren(rows);

    if (focusKey) {
      const row = [...this.tbody.rows].find((tr) => tr.dataset.key === focusKey);
      const target = row && row.children[focusCol]?.querySelector('a, button');
      if (target) target.focus();
    }

    const from = r.item_count ? (r.page - 1) * r.page_size + 1 : 0;
    const to = (r.page - 1) * r.page_size + r.item_count;
    const filtered = r.filtered_count !== r.total_count ? ` (filtered from ${count(r.total_count)})` : '';
    fill(this.summary, `${count(from)}–${count(to)} of ${count(r.filtered_count)} ${this.noun}${filtered}`);
    this.renderPager();
  }

  renderPager() {
    const r = this.result;
    const pages = Math.max(1, r.page_count);
    const go = (page) => this.change({ page: Math.min(Math.max(1, page), pages) });
    const pageInput = h('input', {
      type: 'number', min: 1, max: pages, value: r.page, id: uid('page'), class: 'page-input', inputmode: 'numeric',
    });
    pageInput.addEventListener('change', () => go(Number(pageInput.value) || 1));
    const sizeSelect = select(PAGE_SIZES.map((n) => [n, String(n)]), this.state.size, { id: uid('size') });
    sizeSelect.addEventListener('change', () => this.change({ size: Number(sizeSelect.value), page: 1 }));
    const button = (label, text, page, disabled) =>
      h('button', { type: 'button', class: 'btn small', 'aria-label': label, disabled, onclick: () => go(page) }, text);
    fill(
      this.pager,
      button('First page', '«', 1, r.page <= 1),
      button('Previous page', '‹', r.page - 1, r.page <= 1),
      h('label', { for: pageInput.id }, 'Page'),
      pageInput,
      h('span', null, `of ${count(pages)}`),
      button('Next page', '›', r.page + 1, r.page >= pages),
      button('Last page', '»', pages, r.page >= pages),
      h('span', { class: 'spacer' }),
      h('label', { for: sizeSelect.id }, 'Rows per page'),
      sizeSelect,
    );
  }

  arrowKeys(ev) {
    if (ev.key !== 'ArrowDown' && ev.key !== 'ArrowUp') return;
    const cell = ev.target.closest('td');
    const row = ev.target.closest('tr');
    if (!cell || !row) return;
    const col = [...row.children].indexOf(cell);
    const next = ev.key === 'ArrowDown' ? row.nextElementSibling : row.previousElementSibling;
    const target = next && (next.children[col]?.querySelector('a, button') || next.querySelector('a, button'));
    if (target) {
      ev.preventDefault();
      target.focus();
    }
  }
}

/** A small table of a few items (bindings, consumers), all shown. */
export function simpleTable(label, columns, items, empty = 'None.') {
  return h(
    'div',
    { class: 'scroll' },
    h(
      'table',
      { class: 'data', 'aria-label': label },
      h('thead', null, h('tr', null, columns.map((c) => h('th', { scope: 'col', class: c.num && 'num' }, c.label)))),
      h(
        'tbody',
        null,
        items.length
          ? items.map((item) => h('tr', null, columns.map((c) => h('td', { class: c.num && 'num' }, c.cell(item)))))
          : h('tr', null, h('td', { colspan: columns.length, class: 'empty' }, empty)),
      ),
    ),
  );
}
