//! The Raft frame fuzz target's entry point
//! (`lamina_cluster::fuzzing::raft_frames`) fed the committed seed corpus
//! (`fuzz/corpus/raft_frame/`: real frames of every request kind), random
//! mutations of it, and random bytes: the CI-sized stand-in for a libFuzzer
//! run (`scripts/fuzz-smoke.sh`). Passing means no input panicked and every
//! decoded request encoded stably. The same for the handshake's target
//! (`lamina_cluster::fuzzing::handshake`, `fuzz/corpus/handshake/`):
//! no input passed either side of it.
//! `LAMINA_WRITE_CORPUS=1 cargo test -p lamina-cluster --test fuzz_corpus -- --ignored`
//! regenerates the seeds.
#![expect(clippy::unwrap_used, reason = "a test may panic on a failed setup")]

use std::path::{Path, PathBuf};

use lamina_cluster::frame::write_frame;
use lamina_cluster::fuzzing::{handshake, raft_frames};
use lamina_cluster::group::Read;
use lamina_cluster::network::{Envelope, RpcRequest};
use lamina_cluster::{Op, Request, TypeConfig};
use openraft::raft::{AppendEntriesRequest, VoteRequest};
use openraft::{CommittedLeaderId, Entry, EntryPayload, LogId, Vote};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/raft_frame")
}

fn handshake_corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/handshake")
}

/// What a peer may send at the start of a connection: nothing, a nonce
/// alone, a nonce and a MAC of zeros, a Raft frame (a member without the
/// secret), random bytes.
fn handshake_seeds() -> Vec<Vec<u8>> {
    let mut rng = SmallRng::seed_from_u64(39);
    vec![
        Vec::new(),
        vec![0; 32],
        vec![0; 64],
        seed_frames().swap_remove(0),
        (0..200).map(|_| rng.gen()).collect(),
    ]
}

/// A stream of frames, one of each request kind but snapshots.
fn seed_frames() -> Vec<Vec<u8>> {
    let log_id = |term, index| LogId::new(CommittedLeaderId::new(term, 1), index);
    let write = Request {
        ops: vec![
            Op::Put {
                key: vec![0x80, 0, 0, 1],
                value: vec![0x80, 0, 0, 10],
            },
            Op::Delete {
                key: vec![0x80, 0, 0, 2],
            },
        ],
    };
    let requests = [
        Envelope {
            shard: 0,
            rpc: RpcRequest::Vote(VoteRequest {
                vote: Vote::new(3, 2),
                last_log_id: Some(log_id(2, 41)),
            }),
        },
        Envelope {
            shard: 1,
            rpc: RpcRequest::Append(AppendEntriesRequest::<TypeConfig> {
                vote: Vote::new_committed(3, 1),
                prev_log_id: Some(log_id(3, 41)),
                entries: vec![
                    Entry::<TypeConfig> {
                        log_id: log_id(3, 42),
                        payload: EntryPayload::Normal(write.clone()),
                    },
                    Entry::<TypeConfig> {
                        log_id: log_id(3, 43),
                        payload: EntryPayload::Blank,
                    },
                ],
                leader_commit: Some(log_id(3, 41)),
            }),
        },
        Envelope {
            shard: 2,
            rpc: RpcRequest::Forward {
                from: 3,
                request: write,
            },
        },
        Envelope {
            shard: 0,
            rpc: RpcRequest::Read {
                from: 2,
                read: Read::Range(-5, 5),
                follower: false,
            },
        },
        Envelope {
            shard: 0,
            rpc: RpcRequest::Leader { from: 1 },
        },
    ];
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let frames: Vec<Vec<u8>> = requests
        .iter()
        .map(|r| {
            let mut out = Vec::new();
            rt.block_on(write_frame(&mut out, r)).unwrap();
            out
        })
        .collect();
    let mut stream = frames.concat();
    // A cut-off last frame.
    stream.extend_from_slice(&frames[0][..frames[0].len() / 2]);
    let mut seeds = frames;
    seeds.push(stream);
    seeds
}

#[test]
#[ignore = "writes the seed corpus when LAMINA_WRITE_CORPUS is set"]
fn write_seed_corpus() {
    if std::env::var_os("LAMINA_WRITE_CORPUS").is_none() {
        return;
    }
    std::fs::create_dir_all(corpus_dir()).unwrap();
    for (i, s) in seed_frames().iter().enumerate() {
        std::fs::write(corpus_dir().join(format!("seed-{i}")), s).unwrap();
    }
    std::fs::create_dir_all(handshake_corpus_dir()).unwrap();
    for (i, s) in handshake_seeds().iter().enumerate() {
        std::fs::write(handshake_corpus_dir().join(format!("seed-{i}")), s).unwrap();
    }
}

#[test]
fn the_handshake_lets_no_seed_mutation_or_random_bytes_through() {
    let seeds: Vec<Vec<u8>> = std::fs::read_dir(handshake_corpus_dir())
        .unwrap()
        .map(|e| std::fs::read(e.unwrap().path()).unwrap())
        .collect();
    assert!(seeds.len() >= 5, "no seed corpus");
    // The server reads a whole answer (nonce and MAC) from a long enough
    // seed, and nothing past it.
    let read: Vec<usize> = seeds.iter().map(|s| handshake(s)).collect();
    assert!(read.contains(&64), "{read:?}");
    let mut rng = SmallRng::seed_from_u64(5);
    for seed in &seeds {
        for _ in 0..100 {
            let mut m = seed.clone();
            let len = m.len();
            match rng.gen_range(0..3) {
                0 if len > 0 => {
                    let i = rng.gen_range(0..len);
                    m[i] = rng.gen();
                }
                1 if len > 0 => m.truncate(rng.gen_range(0..len)),
                _ => m.push(rng.gen()),
            }
            handshake(&m);
        }
    }
    for _ in 0..500 {
        let bytes: Vec<u8> = (0..rng.gen_range(0..128)).map(|_| rng.gen()).collect();
        handshake(&bytes);
    }
}

#[test]
fn raft_frame_decoder_survives_seeds_mutations_and_random_bytes() {
    let seeds: Vec<Vec<u8>> = std::fs::read_dir(corpus_dir())
        .unwrap()
        .map(|e| std::fs::read(e.unwrap().path()).unwrap())
        .collect();
    assert!(seeds.len() >= 5, "no seed corpus");
    // Every seed's frames decode: the corpus is of real frames.
    let decoded: usize = seeds.iter().map(|s| raft_frames(s)).sum();
    assert!(decoded >= 10, "{decoded} frames decoded from the seeds");
    let mut rng = SmallRng::seed_from_u64(4);
    const BYTES: &[u8] = b"{}[]\":,0123456789-eE.nultrfa\\\xff\x00";
    for seed in &seeds {
        for _ in 0..300 {
            let mut m = seed.clone();
            for _ in 0..rng.gen_range(1..4) {
                let len = m.len();
                match rng.gen_range(0..4) {
                    0 if len > 4 => {
                        // Inside the body, where JSON is.
                        let i = rng.gen_range(4..len);
                        m[i] = BYTES[rng.gen_range(0..BYTES.len())];
                    }
                    1 if len > 0 => m.truncate(rng.gen_range(0..len)),
                    2 if len > 4 => {
                        let i = rng.gen_range(0..4);
                        m[i] = rng.gen();
                    }
                    _ => {
                        let at = rng.gen_range(0..=len);
                        m.insert(at, BYTES[rng.gen_range(0..BYTES.len())]);
                    }
                }
            }
            raft_frames(&m);
        }
    }
    for _ in 0..2_000 {
        let bytes: Vec<u8> = (0..rng.gen_range(0..64)).map(|_| rng.gen()).collect();
        raft_frames(&bytes);
    }
}
