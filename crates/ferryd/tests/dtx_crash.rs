//! A prepared distributed transaction survives ferryd being killed (SIGKILL): after the
//! restart it is in doubt (dtx.recover lists it), it still holds the message it consumed,
//! the message it published stays out of sight, and it commits or rolls back there, for
//! good (a second kill changes nothing).

mod common;

use bytes::Bytes;
use common::kills::{declare_durable, open, persistent_to, start_on};
use common::DataDir;
use ferry_amqp010::{
    Command, DtxCommit, DtxEnd, DtxPrepare, DtxRecover, DtxRollback, DtxSelect, DtxStart,
    RecoverResult, XaResult, XaStatus, Xid,
};
use ferry_client::{AcceptMode, FlowMode, SequenceSet, Session, SubscribeOptions};

fn xid() -> Option<Xid> {
    Some(Xid {
        format: Some(131_077),
        global_id: Some(Bytes::from_static(b"ferry-xa-global")),
        branch_id: Some(Bytes::from_static(b"branch-1")),
    })
}

async fn xa(s: &Session, command: impl Into<Command>) -> XaStatus {
    let result = s.execute(command).await.expect("dtx command");
    let result = result.expect("an xa-result");
    let decoded: XaResult = result.into_decoded().expect("an xa-result");
    decoded.status.expect("a status")
}

async fn depth(s: &Session, queue: &str) -> u32 {
    let info = s.queue_query(queue).await.expect("query");
    info.message_count.unwrap_or(0)
}

async fn in_doubt(s: &Session) -> usize {
    let result = s.execute(DtxRecover {}).await.expect("recover");
    let recovered: RecoverResult = result.expect("a result").into_decoded().expect("decode");
    recovered.in_doubt.map_or(0, |a| a.items.len())
}

/// Consumes "work" from `xa-in` and publishes "result" to `xa-out` under the branch, and
/// prepares it.
async fn prepare_branch(t: &Session) {
    t.execute(DtxSelect {}).await.expect("select");
    let start = DtxStart {
        xid: xid(),
        ..Default::default()
    };
    assert_eq!(xa(t, start).await, XaStatus::XaOk);
    let opts = SubscribeOptions {
        accept_mode: AcceptMode::Explicit,
        flow_mode: FlowMode::Credit,
        message_credit: 1,
        ..SubscribeOptions::default()
    };
    let mut sub = t.subscribe("xa-in", "d", opts).await.expect("subscribe");
    let delivery = sub.next().await.expect("work");
    assert_eq!(&delivery.body[..], b"work");
    let mut consumed = SequenceSet::new();
    consumed.add(delivery.id);
    t.transfer("", &persistent_to("xa-out", "result"))
        .await
        .expect("transfer");
    t.accept(&consumed).await.expect("accept");
    let end = DtxEnd {
        xid: xid(),
        ..Default::default()
    };
    assert_eq!(xa(t, end).await, XaStatus::XaOk);
    assert_eq!(xa(t, DtxPrepare { xid: xid() }).await, XaStatus::XaOk);
}

#[tokio::test]
async fn a_prepared_branch_survives_a_kill_and_completes_after_it() {
    for commit in [true, false] {
        let dir = DataDir::new("dtx-kill");
        let broker = start_on(&dir);
        {
            let (_c, s) = open(broker.addr).await.expect("connect");
            declare_durable(&s, "xa-in").await;
            declare_durable(&s, "xa-out").await;
            s.transfer_sync("", &persistent_to("xa-in", "work"))
                .await
                .expect("publish");
            let (_c2, t) = open(broker.addr).await.expect("connect");
            prepare_branch(&t).await;
            // The prepare's completion came after its records were on disk.
            broker.kill();
        }
        let broker = start_on(&dir);
        let (_c, s) = open(broker.addr).await.expect("reconnect");
        assert_eq!(in_doubt(&s).await, 1, "dtx.recover lists the branch");
        assert_eq!(depth(&s, "xa-in").await, 0, "held by the branch");
        assert_eq!(depth(&s, "xa-out").await, 0, "published under the branch");
        let (done, expect_in, expect_out) = if commit {
            let c = DtxCommit {
                xid: xid(),
                one_phase: false,
            };
            (xa(&s, c).await, 0, 1)
        } else {
            (xa(&s, DtxRollback { xid: xid() }).await, 1, 0)
        };
        assert_eq!(done, XaStatus::XaOk);
        assert_eq!(depth(&s, "xa-in").await, expect_in);
        assert_eq!(depth(&s, "xa-out").await, expect_out);
        // The outcome's completion came after it was on disk too.
        drop((_c, s));
        broker.kill();
        let broker = start_on(&dir);
        let (_c, s) = open(broker.addr).await.expect("reconnect");
        assert_eq!(in_doubt(&s).await, 0, "commit = {commit}");
        assert_eq!(depth(&s, "xa-in").await, expect_in, "commit = {commit}");
        assert_eq!(depth(&s, "xa-out").await, expect_out, "commit = {commit}");
    }
}
