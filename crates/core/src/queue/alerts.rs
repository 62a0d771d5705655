//! qpidd's queue threshold events: a queue whose depth (messages, or bytes, queued and
//! acquired) reaches its alert threshold tells management once (`queueThresholdCrossedUpward`),
//! and again when it falls back to the lower threshold (`queueThresholdCrossedDownward`),
//! so that a queue hovering at its threshold raises one event, not one per message.
//!
//! Arguments, as qpidd reads them: `qpid.alert_count` (or `qpid.alert_count_up`, or the alias
//! `x-qpid-maximum-message-count`) and `qpid.alert_size` (`qpid.alert_size_up`,
//! `x-qpid-maximum-message-size`) set the upward thresholds; `qpid.alert_count_down` and
//! `qpid.alert_size_down` the downward ones, half the upward one when not given (or not below
//! it). Without an explicit threshold, 80% of a `qpid.max_count` / `qpid.max_size` limit
//! is one (qpidd's default event threshold ratio). A queue given neither downward threshold
//! also raises qpidd's older `queueThresholdExceeded` with every upward event.

use std::sync::{Arc, OnceLock};

use crate::events::{BrokerEvent, Observer, Threshold};
use crate::value::{Arguments, HeaderValue};

/// Where a broker's observer will be, once management sets it: queues with thresholds
/// hold this rather than the observer, which may come after them.
pub(crate) type ObserverSlot = Arc<OnceLock<Arc<dyn Observer>>>;

/// qpidd's `--default-event-threshold-ratio`: percent of a queue's limit.
const LIMIT_RATIO: u64 = 80;

/// A queue's thresholds; a zero upward threshold watches nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Thresholds {
    count_up: u64,
    count_down: u64,
    size_up: u64,
    size_down: u64,
    /// Also raise `queueThresholdExceeded` (no downward threshold was given).
    legacy: bool,
}

fn number(args: &Arguments, keys: &[&str]) -> Option<u64> {
    keys.iter()
        .find_map(|k| args.get(k))
        .and_then(HeaderValue::as_u64)
}

impl Thresholds {
    /// The thresholds `args` ask for, if any.
    pub(crate) fn from_arguments(args: &Arguments) -> Option<Thresholds> {
        let up = |alert: &[&str], limit: &str| {
            number(args, alert)
                .or_else(|| number(args, &[limit]).map(|max| max * LIMIT_RATIO / 100))
                .unwrap_or(0)
        };
        let count_up = up(
            &[
                "qpid.alert_count",
                "qpid.alert_count_up",
                "x-qpid-maximum-message-count",
            ],
            "qpid.max_count",
        );
        let size_up = up(
            &[
                "qpid.alert_size",
                "qpid.alert_size_up",
                "x-qpid-maximum-message-size",
            ],
            "qpid.max_size",
        );
        if count_up == 0 && size_up == 0 {
            return None;
        }
        let count_down = number(args, &["qpid.alert_count_down"]).unwrap_or(0);
        let size_down = number(args, &["qpid.alert_size_down"]).unwrap_or(0);
        let down = |given: u64, up: u64| {
            if given == 0 || given >= up {
                up / 2
            } else {
                given
            }
        };
        Some(Thresholds {
            count_up,
            count_down: down(count_down, count_up),
            size_up,
            size_down: down(size_down, size_up),
            legacy: count_down == 0 && size_down == 0,
        })
    }
}

/// A queue's thresholds and which way each is watched now.
pub(crate) struct Alerts {
    queue: String,
    thresholds: Thresholds,
    observer: ObserverSlot,
    count_rising: bool,
    size_rising: bool,
}

impl std::fmt::Debug for Alerts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Alerts")
            .field("thresholds", &self.thresholds)
            .field("count_rising", &self.count_rising)
            .field("size_rising", &self.size_rising)
            .finish()
    }
}

impl Alerts {
    pub(crate) fn new(queue: &str, thresholds: Thresholds, observer: ObserverSlot) -> Alerts {
        Alerts {
            queue: queue.to_owned(),
            thresholds,
            observer,
            count_rising: true,
            size_rising: true,
        }
    }

    /// Looks at the queue's depth after a change. Called under the queue's lock: the
    /// observer only queues the event.
    pub(crate) fn check(&mut self, messages: u64, bytes: u64) {
        let t = self.thresholds;
        let crossed = |rising: &mut bool, value: u64, up: u64, down: u64| {
            if up == 0 {
                return;
            }
            if *rising && value >= up {
                *rising = false;
                self.tell(Threshold::Upward, messages, bytes);
            } else if !*rising && value <= down {
                *rising = true;
                self.tell(Threshold::Downward, messages, bytes);
            }
        };
        let (mut size_rising, mut count_rising) = (self.size_rising, self.count_rising);
        crossed(&mut size_rising, bytes, t.size_up, t.size_down);
        crossed(&mut count_rising, messages, t.count_up, t.count_down);
        (self.size_rising, self.count_rising) = (size_rising, count_rising);
    }

    fn tell(&self, crossed: Threshold, messages: u64, bytes: u64) {
        let Some(observer) = self.observer.get() else {
            return;
        };
        observer.event(BrokerEvent::QueueThreshold {
            queue: self.queue.clone(),
            crossed,
            messages,
            bytes,
            legacy: self.thresholds.legacy,
        });
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    #[derive(Default)]
    struct Recorder(Mutex<Vec<(Threshold, u64, u64, bool)>>);

    impl Observer for Recorder {
        fn event(&self, event: BrokerEvent) {
            if let BrokerEvent::QueueThreshold {
                crossed,
                messages,
                bytes,
                legacy,
                ..
            } = event
            {
                self.0
                    .lock()
                    .unwrap()
                    .push((crossed, messages, bytes, legacy));
            }
        }
    }

    fn args(pairs: &[(&str, u64)]) -> Arguments {
        pairs
            .iter()
            .map(|(k, v)| (*k, HeaderValue::UInt(*v)))
            .collect()
    }

    fn watched(pairs: &[(&str, u64)]) -> (Alerts, Arc<Recorder>) {
        let recorder = Arc::new(Recorder::default());
        let slot: ObserverSlot = Arc::default();
        let _ = slot.set(recorder.clone());
        let thresholds = Thresholds::from_arguments(&args(pairs)).expect("thresholds");
        (Alerts::new("q", thresholds, slot), recorder)
    }

    fn taken(r: &Recorder) -> Vec<(Threshold, u64, u64, bool)> {
        std::mem::take(&mut *r.0.lock().unwrap())
    }

    #[test]
    fn arguments_and_their_defaults_follow_qpidd() {
        assert_eq!(Thresholds::from_arguments(&args(&[])), None);
        assert_eq!(
            Thresholds::from_arguments(&args(&[("qpid.alert_count", 10)])),
            Some(Thresholds {
                count_up: 10,
                count_down: 5,
                size_up: 0,
                size_down: 0,
                legacy: true
            })
        );
        let t = Thresholds::from_arguments(&args(&[
            ("qpid.alert_size_up", 150),
            ("qpid.alert_size_down", 120),
        ]))
        .unwrap();
        assert_eq!((t.size_up, t.size_down, t.legacy), (150, 120, false));
        // A downward threshold not below the upward one is half of it.
        let t = Thresholds::from_arguments(&args(&[
            ("qpid.alert_count_up", 10),
            ("qpid.alert_count_down", 10),
        ]))
        .unwrap();
        assert_eq!((t.count_up, t.count_down, t.legacy), (10, 5, false));
        // The aliases, and 80% of a limit when no threshold is given.
        let t = Thresholds::from_arguments(&args(&[
            ("x-qpid-maximum-message-count", 7),
            ("x-qpid-maximum-message-size", 100),
        ]))
        .unwrap();
        assert_eq!((t.count_up, t.size_up), (7, 100));
        let t =
            Thresholds::from_arguments(&args(&[("qpid.max_count", 1000), ("qpid.max_size", 50)]))
                .unwrap();
        assert_eq!((t.count_up, t.size_up), (800, 40));
        let t =
            Thresholds::from_arguments(&args(&[("qpid.max_count", 1000), ("qpid.alert_count", 3)]))
                .unwrap();
        assert_eq!(t.count_up, 3);
    }

    #[test]
    fn one_event_each_way_however_long_the_depth_stays_past_a_threshold() {
        // qpid-python's test_hysteresis, as depths.
        let (mut a, r) = watched(&[("qpid.alert_count_up", 10), ("qpid.alert_count_down", 5)]);
        let mut events = Vec::new();
        for depth in [8, 2, 10, 9, 10, 20, 15, 3, 2, 8, 14, 5, 6] {
            a.check(depth, depth * 10);
            events.push(taken(&r).iter().map(|e| (e.0, e.1)).collect::<Vec<_>>());
        }
        let up = |n| vec![(Threshold::Upward, n)];
        let down = |n| vec![(Threshold::Downward, n)];
        let none = Vec::new;
        assert_eq!(
            events,
            [
                none(),
                none(),
                up(10),
                none(),
                none(),
                none(),
                none(),
                down(3),
                none(),
                none(),
                up(14),
                down(5),
                none()
            ]
        );
    }

    #[test]
    fn bytes_and_messages_are_watched_apart() {
        let (mut a, r) = watched(&[
            ("qpid.alert_size", 150),
            ("qpid.alert_size_down", 120),
            ("qpid.alert_count", 100),
        ]);
        a.check(4, 136);
        assert!(taken(&r).is_empty());
        a.check(5, 170);
        assert_eq!(taken(&r), [(Threshold::Upward, 5, 170, false)]);
        a.check(4, 136);
        assert!(taken(&r).is_empty(), "above the lower threshold");
        a.check(3, 102);
        assert_eq!(taken(&r), [(Threshold::Downward, 3, 102, false)]);
        a.check(100, 102);
        assert_eq!(taken(&r), [(Threshold::Upward, 100, 102, false)]);
    }

    #[test]
    fn nothing_is_told_before_management_is_there() {
        let slot: ObserverSlot = Arc::default();
        let t = Thresholds::from_arguments(&args(&[("qpid.alert_count", 1)])).unwrap();
        let mut a = Alerts::new("q", t, slot.clone());
        a.check(1, 1);
        let recorder = Arc::new(Recorder::default());
        let _ = slot.set(recorder.clone());
        a.check(0, 0);
        a.check(1, 1);
        assert_eq!(
            taken(&recorder),
            [
                (Threshold::Downward, 0, 0, true),
                (Threshold::Upward, 1, 1, true)
            ]
        );
    }
}
