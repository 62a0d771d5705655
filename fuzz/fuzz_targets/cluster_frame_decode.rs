#![no_main]
// Arbitrary bytes as what a peer sends on the cluster port: a stream of frames, each payload
// decoded as the handshake proof (read before the peer is authenticated) and as every request
// kind, and the raw bytes too, so the decoders are reached without a valid frame header.
// Nothing may panic, and whatever decodes must re-encode stably.
use ferry_cluster::net::{self, kind, Proof};
use ferry_cluster::rpc::Request;
use serde::de::DeserializeOwned;
use serde::Serialize;

/// Encoding what was decoded, decoding that and encoding again must give the same bytes.
fn stable<T: Serialize + DeserializeOwned>(value: &T) {
    let once = postcard::to_allocvec(value).expect("a decoded value encodes");
    let back: T = postcard::from_bytes(&once).expect("an encoded value decodes");
    let twice = postcard::to_allocvec(&back).expect("a decoded value encodes");
    assert_eq!(once, twice, "re-encoding is not stable");
}

fn decode_all(payload: &[u8]) {
    if let Ok(proof) = net::decode::<Proof>(payload) {
        stable(&proof);
    }
    for k in [kind::APPEND, kind::VOTE, kind::SNAPSHOT, kind::ADMIN] {
        match Request::decode(k, payload) {
            Ok(Request::Append(r)) => stable(&r),
            Ok(Request::Vote(r)) => stable(&r),
            Ok(Request::Snapshot(r)) => stable(&r),
            Ok(Request::Admin(r)) => stable(&r),
            Err(_) => {}
        }
    }
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let mut rest = data;
    while let Ok((k, payload, tail)) = net::split_frame(rest) {
        // As the node reads it: by the frame's own kind.
        let _ = Request::decode(k, payload);
        decode_all(payload);
        rest = tail;
    }
    decode_all(data);
    // A snapshot's replica, as a follower installs it (either encoding); what decodes
    // re-encodes (in the current encoding) stably.
    if let Ok(replica) = ferry_cluster::decode_replica(data) {
        let once = ferry_cluster::encode_replica(&replica).expect("a decoded replica encodes");
        let back = ferry_cluster::decode_replica(&once).expect("an encoded replica decodes");
        let twice = ferry_cluster::encode_replica(&back).expect("a decoded replica encodes");
        assert_eq!(once, twice, "re-encoding a replica is not stable");
    }
});
