//! The DSL, RESP and HTTP-sniffing fuzz targets' entry points (`lamina_server::fuzzing`) fed the
//! committed seed corpora (`fuzz/corpus/<target>/`), random mutations of
//! them, and random bytes: the CI-sized stand-in for a libFuzzer run
//! (`scripts/fuzz-smoke.sh`). Passing means no input panicked.
//! `LAMINA_WRITE_CORPUS=1 cargo test -p lamina-server --test fuzz_corpus -- --ignored`
//! regenerates the seeds.

#![expect(clippy::unwrap_used, reason = "a test may panic on a failed setup")]

use std::path::{Path, PathBuf};

use lamina_server::fuzzing;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn corpus_dir(target: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/corpus")
        .join(target)
}

const LINES: [&str; 16] = [
    "p 10 100",
    "p -2147483648 2147483647",
    "g 10",
    "r -5 5",
    "d 10",
    "l \"/tmp/x.dat\"",
    "s",
    "s 5",
    "info",
    "bloom",
    "misses",
    "io",
    "stats-json",
    "flush",
    "# a comment",
    "@sync",
];

/// Sessions: every command, then writes with reads in between.
fn sessions() -> Vec<String> {
    let mut every = LINES.join("\n");
    every.push_str("\ncompact\nquit\n");
    let mut mixed = String::new();
    for i in 0..120 {
        mixed.push_str(&format!("p {} {}\n", i * 37 % 101, i));
        if i % 9 == 0 {
            mixed.push_str(&format!("d {}\ng {}\nr {} {}\n", i % 13, i % 17, i, i + 30));
        }
    }
    mixed.push_str("s 3\n@end\n");
    vec![every, mixed, "p 1 2\r\ng 1\r\n  g   1  \nbogus\n".into()]
}

/// Redis-port streams: the first byte is the piece size the fuzz entry
/// point feeds them in.
fn resp_streams() -> Vec<Vec<u8>> {
    let mut pipelined = b"\x03*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$3\r\na\x00b\r\n".to_vec();
    pipelined.extend_from_slice(b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n*0\r\n*-1\r\nPING\r\n");
    vec![
        pipelined,
        b"\x01set 'a b' \"c\\x41\\n\"\r\nget \"a b\"\r\n".to_vec(),
        b"\x07*1\r\n$18446744073709551615\r\n".to_vec(),
        b"\x02*2\r\n*1\r\n$1\r\na\r\n".to_vec(),
        b"\x05*4\r\n$4\r\nMSET\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\nb\r\n$1\r\n2\r\nSCAN 0 COUNT 5\r\n"
            .to_vec(),
    ]
}

/// HTTP-sniffing streams: the first byte is the piece size, the second
/// where the HTTP head goes; the rest is DSL or Redis input.
fn http_streams() -> Vec<Vec<u8>> {
    vec![
        b"\x07\x80p 1 1\ng 1\np 2 2\nr 0 9\n".to_vec(),
        b"\x03\x00p 5 5\n@sync\n".to_vec(),
        b"\x05\xffSET a 1\r\nGET a\r\nMSET b 2 c 3\r\n".to_vec(),
        b"\x02\x60*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n*2\r\n$3\r\nGET\r\n$1\r\nk\r\n".to_vec(),
        b"\x09\x40GET / HTTP/1.1\r\nHost: x\r\n\r\np 7 7\nSET x 1\r\n".to_vec(),
        b"\x01\x90*2\r\n$4\r\nPOST\r\n$1\r\n/\r\nd 3\nquit\n".to_vec(),
    ]
}

#[test]
#[ignore = "writes the seed corpora when LAMINA_WRITE_CORPUS is set"]
fn write_seed_corpora() {
    if std::env::var_os("LAMINA_WRITE_CORPUS").is_none() {
        return;
    }
    let dir = corpus_dir("dsl_parse");
    std::fs::create_dir_all(&dir).unwrap();
    for (i, line) in LINES.iter().enumerate() {
        std::fs::write(dir.join(format!("seed-{i}")), line).unwrap();
    }
    let dir = corpus_dir("command_loop");
    std::fs::create_dir_all(&dir).unwrap();
    for (i, s) in sessions().iter().enumerate() {
        std::fs::write(dir.join(format!("seed-{i}")), s).unwrap();
    }
    let dir = corpus_dir("resp_parse");
    std::fs::create_dir_all(&dir).unwrap();
    for (i, s) in resp_streams().iter().enumerate() {
        std::fs::write(dir.join(format!("seed-{i}")), s).unwrap();
    }
    let dir = corpus_dir("http_sniff");
    std::fs::create_dir_all(&dir).unwrap();
    for (i, s) in http_streams().iter().enumerate() {
        std::fs::write(dir.join(format!("seed-{i}")), s).unwrap();
    }
}

fn mutate(rng: &mut StdRng, input: &[u8]) -> Vec<u8> {
    const ALPHABET: &[u8] = b"pgrdls0123456789- \n\"@#\r\xff";
    let mut m = input.to_vec();
    for _ in 0..rng.gen_range(1..5) {
        let len = m.len();
        match rng.gen_range(0..4) {
            0 if len > 0 => {
                let i = rng.gen_range(0..len);
                m[i] = ALPHABET[rng.gen_range(0..ALPHABET.len())];
            }
            1 if len > 0 => m.truncate(rng.gen_range(0..len)),
            2 if len > 0 => {
                let i = rng.gen_range(0..len);
                m.remove(i);
            }
            _ => {
                let at = rng.gen_range(0..=len);
                m.insert(at, ALPHABET[rng.gen_range(0..ALPHABET.len())]);
            }
        }
    }
    m
}

fn inputs(target: &str) -> Vec<Vec<u8>> {
    let inputs: Vec<Vec<u8>> = std::fs::read_dir(corpus_dir(target))
        .unwrap()
        .map(|e| std::fs::read(e.unwrap().path()).unwrap())
        .collect();
    assert!(!inputs.is_empty(), "no seed corpus for {target}");
    inputs
}

#[test]
fn parser_survives_seeds_mutations_and_random_bytes() {
    let mut rng = StdRng::seed_from_u64(1);
    for input in inputs("dsl_parse") {
        fuzzing::parse(&input);
        for _ in 0..2_000 {
            fuzzing::parse(&mutate(&mut rng, &input));
        }
    }
    for _ in 0..5_000 {
        let bytes: Vec<u8> = (0..rng.gen_range(0..40)).map(|_| rng.gen()).collect();
        fuzzing::parse(&bytes);
    }
}

#[test]
fn command_loop_survives_seeds_mutations_and_random_bytes() {
    let mut rng = StdRng::seed_from_u64(2);
    let mut replies = 0;
    for input in inputs("command_loop") {
        replies += fuzzing::command_loop(&input).len();
        for _ in 0..40 {
            fuzzing::command_loop(&mutate(&mut rng, &input));
        }
    }
    assert!(replies > 0, "the seed sessions produced no reply");
    for _ in 0..40 {
        let bytes: Vec<u8> = (0..rng.gen_range(0..600)).map(|_| rng.gen()).collect();
        fuzzing::command_loop(&bytes);
    }
}

#[test]
fn resp_parser_survives_seeds_mutations_and_random_bytes() {
    const RESP: &[u8] = b"*$\r\n0123456789-:+ \"'\\x\xff";
    let mut rng = StdRng::seed_from_u64(3);
    for input in inputs("resp_parse") {
        fuzzing::resp(&input);
        for _ in 0..2_000 {
            let mut m = mutate(&mut rng, &input);
            // RESP's own bytes, beside the DSL alphabet of `mutate`.
            if !m.is_empty() {
                let i = rng.gen_range(0..m.len());
                m[i] = RESP[rng.gen_range(0..RESP.len())];
            }
            fuzzing::resp(&m);
        }
    }
    for _ in 0..5_000 {
        let bytes: Vec<u8> = (0..rng.gen_range(0..80)).map(|_| rng.gen()).collect();
        fuzzing::resp(&bytes);
    }
}

#[test]
fn http_sniffing_survives_seeds_mutations_and_random_bytes() {
    const HTTPISH: &[&[u8]] = &[
        b"POST / HTTP/1.1\r\n",
        b"Host: 127.0.0.1\r\n",
        b"GET /x HTTP/1.0\n",
        b"\r\n\r\n",
        b"*2\r\n$5\r\nhost:\r\n",
        b"get a\r\n",
    ];
    let mut rng = StdRng::seed_from_u64(4);
    for input in inputs("http_sniff") {
        fuzzing::http_sniff(&input);
        for _ in 0..60 {
            let mut m = mutate(&mut rng, &input);
            // HTTP-looking lines anywhere, beside the DSL alphabet.
            if m.len() > 2 && rng.gen_bool(0.5) {
                let at = rng.gen_range(2..=m.len());
                let piece = HTTPISH[rng.gen_range(0..HTTPISH.len())];
                m.splice(at..at, piece.iter().copied());
            }
            fuzzing::http_sniff(&m);
        }
    }
    for _ in 0..40 {
        let bytes: Vec<u8> = (0..rng.gen_range(0..200)).map(|_| rng.gen()).collect();
        fuzzing::http_sniff(&bytes);
    }
}
