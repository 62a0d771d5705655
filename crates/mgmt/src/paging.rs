//! RabbitMQ's list query parameters: `name` (a substring, or with `use_regex=true` a
//! regular expression), `sort` (a dotted field path) and `sort_reverse`, `page` and
//! `page_size` (which make the reply the paged envelope), and `columns` (the fields to keep).
//!
//! Lists are filtered by name before anything is rendered, and when sorted by name (or not
//! at all) only the requested page is rendered, so a console paging through 10,000 queues
//! renders a page's worth of JSON per request.

use std::cmp::Ordering;
use std::collections::HashMap;

use serde_json::{json, Map, Value};

use crate::error::{ApiError, ApiResult};

/// RabbitMQ's limit on `page_size`.
pub const MAX_PAGE_SIZE: usize = 500;
const DEFAULT_PAGE_SIZE: usize = 100;
/// Longest regular expression accepted, checked before compiling (which is not free).
const MAX_PATTERN: usize = 500;
/// Largest compiled regular expression accepted. Matching is linear in the program's size
/// times the name's length, and regex-lite's default (10 MB) lets one 255-byte name take
/// seconds (`(?:.{0,100}){0,1000}#`); at this size the worst pattern measured took about
/// 9 ms a name in a release build, while name filters people write (`^orders\.`, a few
/// alternatives) compile to a small fraction of it.
const MAX_COMPILED: usize = 16 * 1024;

enum NameFilter {
    /// Case-insensitive substring.
    Contains(String),
    Regex(regex_lite::Regex),
}

pub struct ListQuery {
    page: Option<usize>,
    page_size: usize,
    name: Option<NameFilter>,
    sort: Option<Vec<String>>,
    sort_reverse: bool,
    columns: Option<Vec<Vec<String>>>,
}

fn truthy(v: Option<&String>) -> bool {
    v.is_some_and(|v| v == "true" || v == "1")
}

fn positive(q: &HashMap<String, String>, key: &str) -> ApiResult<Option<usize>> {
    match q.get(key) {
        None => Ok(None),
        Some(v) => match v.trim().parse::<usize>() {
            Ok(n) if n > 0 => Ok(Some(n)),
            _ => Err(ApiError::BadRequest(format!(
                "{key} must be a positive integer, not {v:?}"
            ))),
        },
    }
}

fn path(dotted: &str) -> Vec<String> {
    dotted.split('.').map(str::to_owned).collect()
}

impl ListQuery {
    pub fn parse(q: &HashMap<String, String>) -> ApiResult<ListQuery> {
        let page = positive(q, "page")?;
        let page_size = positive(q, "page_size")?.unwrap_or(DEFAULT_PAGE_SIZE);
        if page_size > MAX_PAGE_SIZE {
            return Err(ApiError::BadRequest(format!(
                "page_size must be at most {MAX_PAGE_SIZE}"
            )));
        }
        let name = match q.get("name").filter(|n| !n.is_empty()) {
            None => None,
            Some(n) if truthy(q.get("use_regex")) => {
                if n.len() > MAX_PATTERN {
                    return Err(ApiError::BadRequest(format!(
                        "name pattern too long: at most {MAX_PATTERN} bytes"
                    )));
                }
                let re = regex_lite::RegexBuilder::new(n)
                    .size_limit(MAX_COMPILED)
                    .build()
                    .map_err(|e| ApiError::BadRequest(format!("bad name pattern: {e}")))?;
                Some(NameFilter::Regex(re))
            }
            Some(n) => Some(NameFilter::Contains(n.to_lowercase())),
        };
        let sort = q.get("sort").filter(|s| !s.is_empty()).map(|s| path(s));
        let columns = q.get("columns").filter(|c| !c.is_empty()).map(|c| {
            c.split(',')
                .map(str::trim)
                .filter(|c| !c.is_empty())
                .map(path)
                .collect()
        });
        Ok(ListQuery {
            page,
            page_size,
            name,
            sort,
            sort_reverse: truthy(q.get("sort_reverse")),
            columns,
        })
    }

    fn matches(&self, name: &str) -> bool {
        match &self.name {
            None => true,
            Some(NameFilter::Contains(part)) => name.to_lowercase().contains(part.as_str()),
            Some(NameFilter::Regex(re)) => re.is_match(name),
        }
    }

    fn by_name(&self) -> bool {
        self.sort
            .as_deref()
            .map_or(true, |p| p.len() == 1 && p[0] == "name")
    }

    /// Filters, sorts, pages and renders `items` (which come sorted by name); the reply is
    /// a plain array, or the paged envelope when `page` was given.
    pub fn apply<T>(
        &self,
        items: Vec<T>,
        name_of: impl Fn(&T) -> &str,
        render: impl Fn(&T) -> Value,
    ) -> ApiResult<Value> {
        let selected = self.select(items, &name_of);
        self.render(selected, name_of, render)
    }

    /// Keeps the items whose names match. Done before any lock is taken for rendering: a
    /// regular expression may take milliseconds a name.
    pub fn select<T>(&self, mut items: Vec<T>, name_of: impl Fn(&T) -> &str) -> Selected<T> {
        let total = items.len();
        items.retain(|i| self.matches(name_of(i)));
        Selected { items, total }
    }

    /// Sorts, pages and renders what [`ListQuery::select`] kept, as [`ListQuery::apply`].
    pub fn render<T>(
        &self,
        selected: Selected<T>,
        name_of: impl Fn(&T) -> &str,
        render: impl Fn(&T) -> Value,
    ) -> ApiResult<Value> {
        let Selected { mut items, total } = selected;
        let filtered = items.len();
        let page_count = filtered.div_ceil(self.page_size);
        let range = match self.page {
            None => 0..filtered,
            Some(p) if p > page_count.max(1) => {
                return Err(ApiError::BadRequest(format!(
                    "page {p} out of range: there are {page_count} pages"
                )))
            }
            Some(p) => {
                let start = (p - 1) * self.page_size;
                start..(start + self.page_size).min(filtered)
            }
        };
        let mut rendered: Vec<Value> = if self.by_name() {
            if self.sort.is_some() {
                items.sort_by(|a, b| name_of(a).cmp(name_of(b)));
            }
            if self.sort_reverse {
                items.reverse();
            }
            items[range].iter().map(&render).collect()
        } else {
            // Every item is rendered to find its sort key, but only the key is kept: a
            // console sorting 10,000 queues by depth holds 10,000 numbers, not 10,000
            // rendered queues. The page's items are rendered again.
            let key = self.sort.as_deref().unwrap_or_default();
            let mut keyed: Vec<(Option<Value>, usize)> = items
                .iter()
                .enumerate()
                .map(|(i, item)| (lookup(&render(item), key).cloned(), i))
                .collect();
            keyed.sort_by(|a, b| compare(a.0.as_ref(), b.0.as_ref()));
            if self.sort_reverse {
                keyed.reverse();
            }
            keyed[range]
                .iter()
                .map(|(_, i)| render(&items[*i]))
                .collect()
        };
        if let Some(columns) = &self.columns {
            rendered = rendered.iter().map(|v| project(v, columns)).collect();
        }
        Ok(match self.page {
            None => Value::Array(rendered),
            Some(page) => json!({
                "filtered_count": filtered,
                "item_count": rendered.len(),
                "items": rendered,
                "page": page,
                "page_count": page_count,
                "page_size": self.page_size,
                "total_count": total,
            }),
        })
    }
}

/// The items a name filter kept, and how many there were before it (`total_count`).
pub struct Selected<T> {
    items: Vec<T>,
    total: usize,
}

impl<T> Selected<T> {
    /// Pairs each item with what `f` gives for it: what rendering needs from under a lock,
    /// taken out in one short pass.
    pub fn attach<U>(self, mut f: impl FnMut(&T) -> U) -> Selected<(T, U)> {
        Selected {
            items: self
                .items
                .into_iter()
                .map(|i| {
                    let extra = f(&i);
                    (i, extra)
                })
                .collect(),
            total: self.total,
        }
    }
}

fn lookup<'a>(v: &'a Value, path: &[String]) -> Option<&'a Value> {
    path.iter().try_fold(v, |v, k| v.get(k))
}

/// Missing and null first, then booleans, numbers, strings (case-insensitively), the rest.
fn compare(a: Option<&Value>, b: Option<&Value>) -> Ordering {
    fn rank(v: Option<&Value>) -> u8 {
        match v {
            None | Some(Value::Null) => 0,
            Some(Value::Bool(_)) => 1,
            Some(Value::Number(_)) => 2,
            Some(Value::String(_)) => 3,
            Some(_) => 4,
        }
    }
    match (a, b) {
        (Some(Value::Bool(x)), Some(Value::Bool(y))) => x.cmp(y),
        (Some(Value::Number(x)), Some(Value::Number(y))) => {
            let (x, y) = (x.as_f64().unwrap_or(0.0), y.as_f64().unwrap_or(0.0));
            x.partial_cmp(&y).unwrap_or(Ordering::Equal)
        }
        (Some(Value::String(x)), Some(Value::String(y))) => x.to_lowercase().cmp(&y.to_lowercase()),
        _ => rank(a).cmp(&rank(b)),
    }
}

/// Keeps only `columns` (dotted paths) of `v`, nested as they were.
fn project(v: &Value, columns: &[Vec<String>]) -> Value {
    let mut out = Value::Object(Map::new());
    for path in columns {
        let Some(found) = lookup(v, path) else {
            continue;
        };
        let mut slot = &mut out;
        for (i, key) in path.iter().enumerate() {
            let Value::Object(map) = slot else { break };
            if i + 1 == path.len() {
                map.insert(key.clone(), found.clone());
                break;
            }
            slot = map
                .entry(key.clone())
                .or_insert_with(|| Value::Object(Map::new()));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query(pairs: &[(&str, &str)]) -> ApiResult<ListQuery> {
        ListQuery::parse(
            &pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        )
    }

    fn items() -> Vec<(String, u64)> {
        (1..=25).map(|i| (format!("q{i:02}"), 100 - i)).collect()
    }

    fn render(i: &(String, u64)) -> Value {
        json!({"name": i.0, "messages": i.1, "message_stats": {"publish": i.1 * 2}})
    }

    #[test]
    fn pages_come_in_an_envelope() {
        let q = query(&[("page", "3"), ("page_size", "10")]).unwrap();
        let v = q.apply(items(), |i| &i.0, render).unwrap();
        assert_eq!(v["total_count"], 25);
        assert_eq!(v["filtered_count"], 25);
        assert_eq!(v["page_count"], 3);
        assert_eq!(v["item_count"], 5);
        assert_eq!(v["items"][0]["name"], "q21");
        assert!(query(&[("page", "4"), ("page_size", "10")])
            .unwrap()
            .apply(items(), |i| &i.0, render)
            .is_err());
        assert!(query(&[("page", "0")]).is_err());
        assert!(query(&[("page_size", "501")]).is_err());
    }

    #[test]
    fn names_filter_and_fields_sort() {
        let q = query(&[("name", "Q1"), ("sort", "message_stats.publish")]).unwrap();
        let v = q.apply(items(), |i| &i.0, render).unwrap();
        let names: Vec<&str> = v
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["name"].as_str().unwrap())
            .collect();
        assert_eq!(names.first(), Some(&"q19"));
        assert_eq!(names.len(), 10);
        let re = query(&[
            ("name", "^q2[0-2]$"),
            ("use_regex", "true"),
            ("sort_reverse", "true"),
        ])
        .unwrap();
        let v = re.apply(items(), |i| &i.0, render).unwrap();
        assert_eq!(v[0]["name"], "q22");
        assert_eq!(v.as_array().unwrap().len(), 3);
        assert!(query(&[("name", "("), ("use_regex", "true")]).is_err());
    }

    #[test]
    fn costly_patterns_are_refused_as_bad_requests() {
        // Under regex-lite's default limit this compiles, and takes seconds a name to match.
        let costly = query(&[("name", "(?:.{0,100}){0,1000}#"), ("use_regex", "true")]);
        assert!(
            matches!(&costly, Err(ApiError::BadRequest(r)) if r.contains("size limit")),
            "{:?}",
            costly.as_ref().err()
        );
        let long = "a".repeat(MAX_PATTERN + 1);
        assert!(matches!(
            query(&[("name", &long), ("use_regex", "true")]),
            Err(ApiError::BadRequest(_))
        ));
        // Patterns people write still compile, up to the length limit.
        let alternatives = (0..40).map(|i| format!("queue-{i:02}")).collect::<Vec<_>>();
        let pattern = format!("^(?:{})$", alternatives.join("|"));
        assert!(pattern.len() <= MAX_PATTERN);
        let q = query(&[("name", &pattern), ("use_regex", "true")]).unwrap();
        assert!(q.matches("queue-07") && !q.matches("queue-070"));
        // Long names are matched as a substring search would be, not refused.
        assert!(query(&[("name", &long)]).is_ok());
    }

    #[test]
    fn selecting_then_rendering_counts_what_the_filter_left_out() {
        let q = query(&[("name", "q2"), ("page", "1"), ("sort", "messages")]).unwrap();
        let selected = q.select(items(), |i| &i.0);
        let selected = selected.attach(|i| i.1 * 10);
        let v = q
            .render(
                selected,
                |(i, _)| &i.0,
                |(i, tenfold)| json!({"name": i.0, "messages": i.1, "tenfold": tenfold}),
            )
            .unwrap();
        assert_eq!(v["total_count"], 25);
        assert_eq!(v["filtered_count"], 6);
        assert_eq!(v["items"][0]["name"], "q25");
        assert_eq!(v["items"][0]["tenfold"], 750);
    }

    #[test]
    fn columns_keep_nested_fields() {
        let q = query(&[("columns", "name,message_stats.publish")]).unwrap();
        let v = q.apply(items(), |i| &i.0, render).unwrap();
        assert_eq!(
            v[0],
            json!({"name": "q01", "message_stats": {"publish": 198}})
        );
    }
}
