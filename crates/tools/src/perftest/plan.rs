use super::{CreditWindow, Mode, PerftestOpts};
use crate::conn::Protocol;
use crate::ToolError;

/// Default basic.qos prefetch of an acknowledging 0-9-1 subscriber.
pub const DEFAULT_PREFETCH_091: u32 = 1000;

/// Default credit window of a 1.0 subscriber.
pub const DEFAULT_CREDIT_1: u32 = 1000;

/// Which parts of the test this process runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Actions {
    pub setup: bool,
    pub control: bool,
    pub publish: bool,
    pub subscribe: bool,
    /// None of the four was asked for: this process runs everything, with --npubs and
    /// --nsubs clients per queue. Otherwise each --publish/--subscribe process runs one.
    pub single_process: bool,
}

/// The derived figures of a perftest run, computed exactly as qpid-perftest computes them.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub mode: Mode,
    /// Publishers per queue or topic (all publishers in fanout mode).
    pub npubs: usize,
    /// Subscribers per queue or topic (all subscribers in fanout mode).
    pub nsubs: usize,
    /// Queues or topics; forced to 1 in fanout mode.
    pub qt: usize,
    /// Messages per publisher, rounded up to a multiple of --nsubs in shared mode so the
    /// subscribers of a queue split it evenly.
    pub count: usize,
    pub size: usize,
    pub iterations: usize,
    pub total_pubs: usize,
    pub total_subs: usize,
    /// Messages each subscriber receives.
    pub sub_quota: usize,
    /// Every message counted once when published and once per subscriber that receives
    /// it: `total_pubs * count + total_subs * sub_quota`.
    pub transfers: usize,
    pub tx_pub: usize,
    pub tx_sub: usize,
    pub sub_ack: usize,
    pub sync_publish: bool,
    pub pub_confirm: bool,
    pub durable: bool,
    pub summary: bool,
    pub interval_pub_ms: u32,
    pub interval_sub_ms: u32,
    pub base_name: String,
    pub actions: Actions,
    pub protocol: Protocol,
    /// 0-9-1 publishers' window of unconfirmed messages, 1.0 publishers' window of
    /// unsettled transfers; 0: no confirm mode (1.0: transfers go settled).
    pub confirm: u32,
    /// Unsettled deliveries a subscriber may hold: 0-9-1 prefetch, 0-10 credit window.
    pub prefetch: u32,
    /// 0-9-1 `x-queue-type` of the test queues, if any.
    pub queue_type: Option<String>,
}

impl Plan {
    /// The plan and the warnings qpid-perftest would print about adjusted options.
    pub fn from_opts(o: &PerftestOpts) -> Result<(Plan, Vec<String>), ToolError> {
        let bad = |what: &str| Err(ToolError::InvalidOptions(what.to_string()));
        if o.npubs == 0 || o.nsubs == 0 {
            return bad("--npubs and --nsubs must be at least 1");
        }
        if o.qt == 0 {
            return bad("--qt must be at least 1");
        }
        if o.count == 0 {
            return bad("--count must be at least 1");
        }
        if o.iterations == 0 {
            return bad("--iterations must be at least 1");
        }
        let mut warnings = Vec::new();
        let mut count = o.count;
        let mut qt = o.qt;
        let (total_pubs, total_subs, sub_quota) = match o.mode {
            Mode::Shared => {
                if count % o.nsubs != 0 {
                    count += o.nsubs - count % o.nsubs;
                    warnings.push(format!(
                        "Adjusted --count to {count} the next multiple of --nsubs"
                    ));
                }
                (o.npubs * qt, o.nsubs * qt, o.npubs * count / o.nsubs)
            }
            Mode::Fanout => {
                if qt != 1 {
                    warnings.push(format!("Fanout mode, ignoring --qt={qt}"));
                }
                qt = 1;
                (o.npubs, o.nsubs, o.npubs * count)
            }
            Mode::Topic => (o.npubs * qt, o.nsubs * qt, o.npubs * count),
        };
        let transfers = total_pubs
            .checked_mul(count)
            .and_then(|p| {
                total_subs
                    .checked_mul(sub_quota)
                    .and_then(|s| p.checked_add(s))
            })
            .ok_or_else(|| ToolError::InvalidOptions("message totals overflow".into()))?;

        let mut tx_pub = o.pub_tx;
        let mut tx_sub = o.sub_tx;
        if o.tx != 0 {
            if tx_pub != 0 {
                warnings.push(format!(
                    "Using overridden tx value for publishers: {tx_pub}"
                ));
            } else {
                tx_pub = o.tx;
            }
            if tx_sub != 0 {
                warnings.push(format!(
                    "Using overridden tx value for subscribers: {tx_sub}"
                ));
            } else {
                tx_sub = o.tx;
            }
        }

        let protocol = o.conn.protocol;
        let mut confirm = o.confirm;
        match protocol {
            Protocol::Amqp010 if confirm > 0 => {
                return bad(
                    "--confirm is for --protocol amqp0-9-1: over 0-10 the broker \
                            completes every transfer (see --pub-confirm and --sync-publish)",
                );
            }
            Protocol::Amqp091 if o.sync_publish && confirm != 1 => {
                // Over 0-9-1 the only per-message answer is a publisher confirm.
                confirm = 1;
                warnings.push("--sync-publish over 0-9-1: publisher confirms, window 1".into());
            }
            Protocol::Amqp1 if o.sync_publish && confirm != 1 => {
                // Over 1.0 the per-message answer is the broker settling an unsettled
                // transfer.
                confirm = 1;
                warnings.push("--sync-publish over 1.0: unsettled transfers, window 1".into());
            }
            _ => {}
        }
        if protocol == Protocol::Amqp1 && (tx_pub > 0 || tx_sub > 0) {
            return bad("--tx, --pub-tx and --sub-tx are not supported over AMQP 1.0");
        }
        if o.queue_type.is_some() && protocol != Protocol::Amqp091 {
            return bad("--queue-type is for --protocol amqp0-9-1 (x-queue-type)");
        }
        if confirm > 0 && tx_pub > 0 {
            return bad("--confirm and publisher transactions exclude each other \
                        (a 0-9-1 channel is in confirm mode or transactional, not both)");
        }
        let prefetch = match (protocol, o.prefetch) {
            (_, Some(0)) => return bad("--prefetch must be at least 1"),
            (Protocol::Amqp091, Some(n)) if n > u32::from(u16::MAX) => {
                return bad("--prefetch over 0-9-1 is at most 65535 (basic.qos takes 16 bits)")
            }
            (_, Some(n)) => n,
            (Protocol::Amqp091, None) => DEFAULT_PREFETCH_091,
            (Protocol::Amqp1, None) => DEFAULT_CREDIT_1,
            (Protocol::Amqp010, None) => CreditWindow::DEFAULT,
        };
        // A 0-9-1 subscriber acknowledges (or commits) every N messages; with fewer than N
        // unacknowledged allowed, the broker would stop short of N and wait forever.
        let batch = o.sub_ack.max(tx_sub);
        let prefetch = if protocol == Protocol::Amqp091 && (batch as u64) > u64::from(prefetch) {
            let raised = u32::try_from(batch).unwrap_or(u32::MAX);
            if raised > u32::from(u16::MAX) {
                return bad(
                    "--sub-ack and --tx over 0-9-1 are at most 65535 (the largest prefetch)",
                );
            }
            warnings.push(format!(
                "Raised --prefetch to {raised} to cover the acknowledgement batch"
            ));
            raised
        } else {
            prefetch
        };

        let single_process = !(o.setup || o.control || o.publish || o.subscribe);
        let actions = Actions {
            setup: o.setup || single_process,
            control: o.control || single_process,
            publish: o.publish || single_process,
            subscribe: o.subscribe || single_process,
            single_process,
        };

        let plan = Plan {
            mode: o.mode,
            npubs: o.npubs,
            nsubs: o.nsubs,
            qt,
            count,
            size: o.size,
            iterations: o.iterations,
            total_pubs,
            total_subs,
            sub_quota,
            transfers,
            tx_pub,
            tx_sub,
            sub_ack: o.sub_ack,
            sync_publish: o.sync_publish,
            pub_confirm: o.pub_confirm,
            durable: o.durable,
            summary: o.summary,
            interval_pub_ms: o.interval_pub,
            interval_sub_ms: o.interval_sub,
            base_name: o.base_name.clone(),
            actions,
            protocol,
            confirm,
            prefetch,
            queue_type: o.queue_type.clone(),
        };
        Ok((plan, warnings))
    }

    /// Name of a control queue: `<base-name>_<name>`.
    pub fn control_queue(&self, name: &str) -> String {
        format!("{}_{}", self.base_name, name)
    }

    /// Name of the i-th test queue (shared mode) or routing key (fanout, topic).
    pub fn queue_or_topic(&self, i: usize) -> String {
        format!("{}{}", self.base_name, i)
    }

    /// Exchange publishers send to: the default exchange in shared mode.
    pub fn exchange(&self) -> &'static str {
        match self.mode {
            Mode::Shared => "",
            Mode::Fanout => "amq.fanout",
            Mode::Topic => "amq.topic",
        }
    }

    /// Publishers this process starts for each queue or topic.
    pub fn local_pubs_per_key(&self) -> usize {
        match (self.actions.publish, self.actions.single_process) {
            (false, _) => 0,
            (true, true) => self.npubs,
            (true, false) => 1,
        }
    }

    /// Subscribers this process starts for each queue or topic.
    pub fn local_subs_per_key(&self) -> usize {
        match (self.actions.subscribe, self.actions.single_process) {
            (false, _) => 0,
            (true, true) => self.nsubs,
            (true, false) => 1,
        }
    }

    /// Message body of `size` bytes; the first 8 carry the sequence number, so it is never
    /// shorter than that (qpid-perftest does the same).
    pub fn body_len(&self) -> usize {
        self.size.max(8)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cmd {
        #[command(flatten)]
        opts: PerftestOpts,
    }

    fn plan(args: &[&str]) -> (Plan, Vec<String>) {
        let o = Cmd::try_parse_from(std::iter::once("perftest").chain(args.iter().copied()))
            .unwrap()
            .opts;
        Plan::from_opts(&o).unwrap()
    }

    #[test]
    fn shared_one_to_one() {
        let (p, w) = plan(&["--count", "100000", "--size", "256"]);
        assert!(w.is_empty());
        assert_eq!((p.total_pubs, p.total_subs, p.sub_quota), (1, 1, 100_000));
        assert_eq!(p.transfers, 200_000);
        assert!(p.actions.single_process && p.actions.setup && p.actions.control);
    }

    #[test]
    fn shared_rounds_count_up_to_a_multiple_of_nsubs() {
        let (p, w) = plan(&[
            "--count", "1000", "--npubs", "2", "--nsubs", "3", "--qt", "2",
        ]);
        assert_eq!(p.count, 1002);
        assert_eq!(
            w,
            vec!["Adjusted --count to 1002 the next multiple of --nsubs"]
        );
        assert_eq!((p.total_pubs, p.total_subs), (4, 6));
        // Each queue gets 2 × 1002 messages, split over its 3 subscribers.
        assert_eq!(p.sub_quota, 668);
        assert_eq!(p.transfers, 4 * 1002 + 6 * 668);
    }

    #[test]
    fn fanout_ignores_qt_and_every_sub_gets_every_message() {
        let (p, w) = plan(&[
            "--mode", "fanout", "--count", "10", "--npubs", "2", "--nsubs", "4", "--qt", "3",
        ]);
        assert_eq!(w, vec!["Fanout mode, ignoring --qt=3"]);
        assert_eq!(p.qt, 1);
        assert_eq!((p.total_pubs, p.total_subs, p.sub_quota), (2, 4, 20));
        assert_eq!(p.transfers, 2 * 10 + 4 * 20);
        assert_eq!(p.exchange(), "amq.fanout");
    }

    #[test]
    fn topic_counts_per_topic() {
        let (p, w) = plan(&[
            "--mode", "topic", "--count", "10", "--npubs", "2", "--nsubs", "3", "--qt", "2",
        ]);
        assert!(w.is_empty());
        assert_eq!((p.total_pubs, p.total_subs, p.sub_quota), (4, 6, 20));
        assert_eq!(p.transfers, 4 * 10 + 6 * 20);
    }

    #[test]
    fn tx_applies_to_both_sides_unless_overridden() {
        let (p, _) = plan(&["--tx", "10"]);
        assert_eq!((p.tx_pub, p.tx_sub), (10, 10));
        let (p, w) = plan(&["--tx", "10", "--pub-tx", "5"]);
        assert_eq!((p.tx_pub, p.tx_sub), (5, 10));
        assert_eq!(w.len(), 1);
    }

    #[test]
    fn multi_process_roles_run_one_client_each() {
        let (p, _) = plan(&["--publish", "--npubs", "4"]);
        assert!(!p.actions.single_process && p.actions.publish && !p.actions.control);
        assert_eq!((p.local_pubs_per_key(), p.local_subs_per_key()), (1, 0));
        let (p, _) = plan(&["--npubs", "4", "--nsubs", "2"]);
        assert_eq!((p.local_pubs_per_key(), p.local_subs_per_key()), (4, 2));
    }

    #[test]
    fn names() {
        let (p, _) = plan(&["--base-name", "b"]);
        assert_eq!(p.control_queue("pub_start"), "b_pub_start");
        assert_eq!(p.queue_or_topic(3), "b3");
        assert_eq!(p.exchange(), "");
    }

    #[test]
    fn protocol_options() {
        let (p, w) = plan(&["--protocol", "amqp0-9-1", "--confirm", "100"]);
        assert!(w.is_empty());
        assert_eq!(
            (p.protocol, p.confirm, p.prefetch),
            (Protocol::Amqp091, 100, 1000)
        );
        let (p, w) = plan(&["--protocol", "amqp0-9-1", "--sync-publish"]);
        assert_eq!(p.confirm, 1);
        assert_eq!(w.len(), 1);
        let (p, _) = plan(&["--prefetch", "500"]);
        assert_eq!((p.protocol, p.prefetch), (Protocol::Amqp010, 500));
        let (p, _) = plan(&[]);
        assert_eq!(p.prefetch, CreditWindow::DEFAULT);
        // Acknowledging every 5000 needs 5000 deliveries outstanding.
        let (p, w) = plan(&["--protocol", "amqp0-9-1", "--sub-ack", "5000"]);
        assert_eq!(p.prefetch, 5000);
        assert_eq!(
            w,
            vec!["Raised --prefetch to 5000 to cover the acknowledgement batch"]
        );
    }

    #[test]
    fn amqp1_options() {
        let (p, w) = plan(&[
            "--protocol",
            "amqp1.0",
            "--confirm",
            "100",
            "--sub-ack",
            "50",
        ]);
        assert!(w.is_empty());
        assert_eq!(
            (p.protocol, p.confirm, p.prefetch),
            (Protocol::Amqp1, 100, 1000)
        );
        let (p, w) = plan(&["--protocol", "amqp1.0", "--sync-publish"]);
        assert_eq!(p.confirm, 1);
        assert_eq!(
            w,
            vec!["--sync-publish over 1.0: unsettled transfers, window 1"]
        );
        // Credit is its own bound over 1.0: acknowledging in batches larger than the
        // window raises nothing.
        let (p, w) = plan(&[
            "--protocol",
            "amqp1.0",
            "--sub-ack",
            "5000",
            "--prefetch",
            "100",
        ]);
        assert_eq!((p.prefetch, w.len()), (100, 0));
        let o = Cmd::try_parse_from(["perftest", "--protocol", "amqp1.0", "--tx", "5"])
            .unwrap()
            .opts;
        assert!(Plan::from_opts(&o).is_err());
    }

    #[test]
    fn conflicting_protocol_options_are_refused() {
        for args in [
            &["--confirm", "10"][..],
            &["--protocol", "amqp0-9-1", "--confirm", "10", "--tx", "5"],
            &["--protocol", "amqp0-9-1", "--prefetch", "70000"],
            &["--prefetch", "0"],
        ] {
            let o = Cmd::try_parse_from(std::iter::once("perftest").chain(args.iter().copied()))
                .unwrap()
                .opts;
            assert!(Plan::from_opts(&o).is_err(), "{args:?}");
        }
    }

    #[test]
    fn zero_counts_are_refused() {
        let o = Cmd::try_parse_from(["perftest", "--nsubs", "0"])
            .unwrap()
            .opts;
        assert!(Plan::from_opts(&o).is_err());
    }
}
