//! The encoder as a whole: special tokens, streams cut anywhere, batches, files, decoding and the
//! messages for bad vocabularies. (The merge rules themselves are tested in `bpe.rs`; the
//! differential tests against the Python reference and tiktoken are in
//! tests/test_engine_encode.py.)

use super::*;
use crate::bpe::tests::{brute_pair, brute_token, generate, Rng};
use bpestore_pretokenize::MatchFailure;
use std::collections::HashMap;

const EOT: &str = "<|endoftext|>";

type Bytes = Vec<u8>;

struct Fixture {
    tokens: Vec<(u32, Bytes)>,
    merges: Vec<(Bytes, Bytes)>,
    specials: Vec<(String, u32)>,
}

/// A vocabulary over letters, space and a few multi-byte characters' bytes, with `<|endoftext|>`
/// and `<a>` as special tokens (new ids).
fn fixture(seed: u64) -> Fixture {
    let mut rng = Rng(seed);
    let (tokens, merges) = generate(&mut rng, b" abc\n\xc3\xa9", 60, 10);
    let next = tokens.iter().map(|&(id, _)| id).max().unwrap() + 1;
    Fixture {
        tokens,
        merges,
        specials: vec![(EOT.into(), next), ("<a>".into(), next + 1)],
    }
}

fn encoder(fixture: &Fixture, rule: MergeRule) -> Encoder {
    Encoder::new(
        fixture.tokens.clone(),
        fixture.merges.clone(),
        fixture.specials.clone(),
        bpestore_pretokenize::GPT2_PATTERN,
        rule,
    )
    .unwrap()
}

fn random_text(rng: &mut Rng, pieces: usize) -> String {
    const PARTS: [&str; 16] = [
        " ab", "a", "b", "cab", " ", "  ", "\n", " \n ", "é", "éa", EOT, "<a>", "<|endof",
        "text|>", "ccc", "'s",
    ];
    (0..pieces).map(|_| PARTS[rng.below(PARTS.len())]).collect()
}

/// The expected ids: specials cut out (longest first), pieces by the regex, each merged by the
/// brute-force rule.
/// Writes `content` to `input`, encodes it to `output` and returns the error the encoder gives.
fn file_error(
    encoder: &Encoder,
    input: &std::path::Path,
    output: &std::path::Path,
    content: &[u8],
    threads: usize,
    chunk_bytes: usize,
) -> FileError {
    std::fs::write(input, content).unwrap();
    encoder
        .encode_file_in_chunks(input, output, threads, &mut |_| true, chunk_bytes)
        .unwrap_err()
}

fn expected(fixture: &Fixture, rule: MergeRule, text: &str, allowed: &[&str]) -> Vec<u32> {
    let ids: HashMap<Bytes, u32> = fixture
        .tokens
        .iter()
        .map(|(id, t)| (t.clone(), *id))
        .collect();
    let mut rank = HashMap::new();
    for (r, pair) in fixture.merges.iter().enumerate() {
        rank.entry(pair.clone()).or_insert(r);
    }
    thread_local! {
        static REGEX: fancy_regex::Regex = fancy_regex::Regex::new(bpestore_pretokenize::GPT2_PATTERN).unwrap();
    }
    let mut out = Vec::new();
    let ordinary = |text: &str, out: &mut Vec<u32>| {
        let pieces: Vec<String> = REGEX.with(|regex| {
            regex
                .find_iter(text)
                .map(|m| m.unwrap().as_str().to_owned())
                .collect()
        });
        for piece in &pieces {
            let piece = piece.as_bytes();
            let tokens = match rule {
                MergeRule::Pair => brute_pair(piece, &rank),
                MergeRule::Token => brute_token(piece, &ids),
            };
            out.extend(tokens.iter().map(|t| ids[t]));
        }
    };
    let mut rest = text;
    loop {
        // the leftmost allowed special token, the longest at that place
        let found = allowed
            .iter()
            .filter_map(|s| rest.find(s).map(|at| (at, std::cmp::Reverse(s.len()), *s)))
            .min();
        let Some((at, _, special)) = found else { break };
        ordinary(&rest[..at], &mut out);
        out.push(
            fixture
                .specials
                .iter()
                .find(|(s, _)| s == special)
                .unwrap()
                .1,
        );
        rest = &rest[at + special.len()..];
    }
    ordinary(rest, &mut out);
    out
}

#[test]
fn encode_matches_brute_force_with_each_special_token_policy() {
    // (an unoptimised build is many times slower: fewer vocabularies there)
    let seeds = if cfg!(debug_assertions) { 3 } else { 20 };
    for seed in 1..=seeds {
        let fixture = fixture(seed);
        for rule in [MergeRule::Pair, MergeRule::Token] {
            let encoder = encoder(&fixture, rule);
            let mut rng = Rng(seed * 7919);
            for _ in 0..20 {
                let text = random_text(&mut rng, 30);
                assert_eq!(
                    encoder.encode(&text, AllowedSpecial::All).unwrap(),
                    expected(&fixture, rule, &text, &[EOT, "<a>"])
                );
                assert_eq!(
                    encoder.encode(&text, AllowedSpecial::None).unwrap(),
                    expected(&fixture, rule, &text, &[])
                );
                assert_eq!(
                    encoder
                        .encode(&text, AllowedSpecial::Only(&["<a>"]))
                        .unwrap(),
                    expected(&fixture, rule, &text, &["<a>"])
                );
                // once more, now from the cache
                assert_eq!(
                    encoder.encode(&text, AllowedSpecial::All).unwrap(),
                    expected(&fixture, rule, &text, &[EOT, "<a>"])
                );
            }
        }
    }
}

#[test]
fn windows_of_any_number_of_pieces_give_the_brute_force_ids() {
    // The scanner hands the encoder a 64-byte window's pieces at once (written some at a time,
    // past the last piece too): runs of one-byte pieces ("a\n": 60 and more in a window), words
    // longer than a window (none), and everything between, at every offset.
    let fixture = fixture(5);
    for rule in [MergeRule::Pair, MergeRule::Token] {
        let encoder = encoder(&fixture, rule);
        let mut rng = Rng(31);
        for _ in 0..40 {
            let mut text = String::new();
            while text.len() < 3000 {
                match rng.below(4) {
                    0 => text.push_str(&"a\n".repeat(1 + rng.below(80))),
                    1 => text.push_str(&"b".repeat(1 + rng.below(200))),
                    2 => text.push_str(&" ab".repeat(1 + rng.below(40))),
                    _ => {
                        let pieces = 1 + rng.below(20);
                        text.push_str(&random_text(&mut rng, pieces));
                    }
                }
            }
            let want = expected(&fixture, rule, &text, &[EOT, "<a>"]);
            for pass in ["cold", "warm"] {
                let ids = encoder.encode(&text, AllowedSpecial::All).unwrap();
                assert!(ids == want, "{pass}, {rule:?}: {text:?}");
            }
        }
    }
}

#[test]
fn a_stream_gives_the_same_ids_however_it_is_cut() {
    let fixture = fixture(99);
    let encoder = encoder(&fixture, MergeRule::Pair);
    let mut rng = Rng(4242);
    for _ in 0..40 {
        let text = random_text(&mut rng, 200);
        let whole = encoder.encode(&text, AllowedSpecial::All).unwrap();
        let mut state = StreamState::with_block(1 + rng.below(40));
        let mut ids = Vec::new();
        let mut position = 0;
        while position < text.len() {
            let mut end = (position + 1 + rng.below(12)).min(text.len());
            while !text.is_char_boundary(end) {
                end += 1;
            }
            ids.extend(state.feed(&encoder, &text[position..end]).unwrap());
            position = end;
        }
        ids.extend(state.finish(&encoder).unwrap());
        assert_eq!(ids, whole, "{text:?}");
    }
}

#[test]
fn batches_on_several_threads_keep_their_order() {
    let fixture = fixture(5);
    let encoder = encoder(&fixture, MergeRule::Token);
    let mut rng = Rng(77);
    let texts: Vec<String> = (0..50).map(|i| random_text(&mut rng, i)).collect();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let one_by_one: Vec<Vec<u32>> = refs
        .iter()
        .map(|t| encoder.encode(t, AllowedSpecial::All).unwrap())
        .collect();
    for threads in [1, 2, 3, 64] {
        assert_eq!(encoder.encode_batch(&refs, threads).unwrap(), one_by_one);
    }
    assert!(encoder.encode_batch(&[], 2).unwrap().is_empty());
}

#[test]
fn an_overlapped_batch_hands_over_every_text_once_and_stops_on_an_error() {
    let fixture = fixture(6);
    let encoder = encoder(&fixture, MergeRule::Pair);
    let mut rng = Rng(78);
    // Empty texts too, and one long one among short ones (blocks are cut by bytes).
    let mut texts: Vec<String> = (0..300).map(|i| random_text(&mut rng, i % 40)).collect();
    texts[17] = random_text(&mut rng, 20_000);
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let one_by_one: Vec<Vec<u32>> = refs
        .iter()
        .map(|t| encoder.encode(t, AllowedSpecial::All).unwrap())
        .collect();
    for threads in [1, 2, 3, 64] {
        let mut got: Vec<Option<Vec<u32>>> = vec![None; refs.len()];
        let mut waits = 0;
        encoder
            .encode_batch_overlapped(
                &refs,
                threads,
                AllowedSpecial::All,
                |next| {
                    waits += 1;
                    next()
                },
                |block| {
                    let first = block.first;
                    for (i, ids) in block.texts().enumerate() {
                        assert!(got[first + i].is_none(), "text {} twice", first + i);
                        got[first + i] = Some(ids.to_vec());
                    }
                    Ok::<(), ()>(())
                },
            )
            .unwrap();
        let got: Vec<Vec<u32>> = got.into_iter().map(Option::unwrap).collect();
        assert_eq!(got, one_by_one, "{threads} threads");
        assert!(waits > 1, "the texts came in one block");
    }
    let mut taken = 0;
    let result = encoder.encode_batch_overlapped(
        &refs,
        2,
        AllowedSpecial::All,
        |next| next(),
        |_| {
            taken += 1;
            Err("no room")
        },
    );
    assert!(matches!(result, Err(OverlappedError::Take("no room"))));
    assert_eq!(taken, 1);
    let nothing =
        encoder.encode_batch_overlapped(&[], 2, AllowedSpecial::All, |next| next(), |_| Err(()));
    assert!(nothing.is_ok());
}

#[test]
fn decoding_gives_the_bytes_back_and_names_an_unknown_id() {
    let fixture = fixture(3);
    let encoder = encoder(&fixture, MergeRule::Pair);
    let text = "cab é<|endoftext|> a<a>\n";
    assert_eq!(
        encoder
            .decode_bytes(&encoder.encode(text, AllowedSpecial::All).unwrap())
            .unwrap(),
        text.as_bytes()
    );
    let max = encoder.max_id();
    let error = encoder.decode_bytes(&[0, max + 1, max + 7]).unwrap_err();
    assert_eq!(
        error.to_string(),
        format!(
            "id {} is not in the vocabulary (ids go up to {max})",
            max + 1
        )
    );
}

#[test]
fn a_bad_vocabulary_is_refused_with_bpestores_messages() {
    let bytes: Vec<(u32, Bytes)> = (0..=255u8).map(|b| (b as u32, vec![b])).collect();
    let build = |tokens: Vec<(u32, Bytes)>, merges: Vec<(Bytes, Bytes)>| {
        Encoder::new(
            tokens,
            merges,
            vec![],
            bpestore_pretokenize::GPT2_PATTERN,
            MergeRule::Pair,
        )
        .err()
        .map(|e| e.to_string())
    };
    assert_eq!(
        build(bytes[2..].to_vec(), vec![]).as_deref(),
        Some("the vocab lacks 2 single-byte tokens (0x00, 0x01); byte-level BPE needs all 256")
    );
    assert_eq!(
        build(bytes[10..].to_vec(), vec![]).as_deref(),
        Some("the vocab lacks 10 single-byte tokens (0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07 ...); byte-level BPE needs all 256")
    );
    let mut twice = bytes.clone();
    twice.push((300, b"'a".to_vec()));
    twice.push((301, b"'a".to_vec()));
    assert_eq!(
        build(twice, vec![]).as_deref(),
        Some("ids 300 and 301 both stand for the token b\"'a\"")
    );
    assert_eq!(
        build(bytes.clone(), vec![(b"a".to_vec(), b"\xff\n".to_vec())]).as_deref(),
        Some("merge 0 (b'a', b'\\xff\\n'): b'\\xff\\n' is not in the vocab")
    );
    assert_eq!(
        build(bytes.clone(), vec![(b"a".to_vec(), b"b".to_vec())]).as_deref(),
        Some("merge 0 (b'a', b'b'): b'ab' is not in the vocab")
    );
    let mut with_ab = bytes.clone();
    with_ab.push((256, b"ab".to_vec()));
    let ab = (b"a".to_vec(), b"b".to_vec());
    assert_eq!(
        build(with_ab.clone(), vec![ab.clone(), ab.clone()]).as_deref(),
        Some("merge 1 (b'a', b'b') repeats merge 0; each merge may be listed once")
    );
    // check_model says what building the encoder says, and nothing for a good model.
    let borrowed: Vec<(u32, &[u8])> = with_ab.iter().map(|(id, t)| (*id, t.as_slice())).collect();
    let pair = (ab.0.as_slice(), ab.1.as_slice());
    assert_eq!(check_model(&borrowed, &[pair], true).ok(), Some(()));
    assert_eq!(
        check_model(&borrowed, &[pair, pair], true)
            .err()
            .map(|e| e.to_string())
            .as_deref(),
        Some("merge 1 (b'a', b'b') repeats merge 0; each merge may be listed once")
    );
    assert_eq!(check_model(&borrowed, &[pair, pair], false).ok(), Some(()));
    assert!(check_model(&borrowed[1..], &[], false).is_err());
}

fn entries(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn an_unfinished_array_is_a_hidden_file_that_is_no_npy_and_goes_when_stopped() {
    let fixture = fixture(14);
    let encoder = encoder(&fixture, MergeRule::Pair);
    let dir = std::env::temp_dir().join(format!("bpestore-partial-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (input, output) = (dir.join("input.txt"), dir.join("ids.npy"));
    std::fs::write(&input, random_text(&mut Rng(7), 20_000)).unwrap();
    let mut seen = Vec::new();
    let result = encoder.encode_file_in_chunks(
        &input,
        &output,
        2,
        &mut |_| {
            // While it is written: one temporary file, hidden, named after the output and this
            // process, whose first bytes are not a .npy header.
            let names = entries(&dir);
            let partial: Vec<&String> = names.iter().filter(|n| n.ends_with(".partial")).collect();
            assert_eq!(partial.len(), 1, "{names:?}");
            let prefix = format!(".ids.npy.{}-", std::process::id());
            assert!(partial[0].starts_with(&prefix), "{names:?}");
            let data = std::fs::read(dir.join(partial[0])).unwrap();
            assert!(data.starts_with(PARTIAL_HEADER_START) && !data.starts_with(b"\x93NUMPY"));
            seen.push(data.len());
            seen.len() < 3 // then stop, as Ctrl-C does
        },
        1000,
    );
    assert!(matches!(result, Err(FileError::Cancelled)), "{result:?}");
    assert_eq!(seen.len(), 3);
    assert_eq!(entries(&dir), ["input.txt"]);
    // Completed, the same name holds a real header.
    encoder
        .encode_file_in_chunks(&input, &output, 2, &mut |_| true, 1000)
        .unwrap();
    assert_eq!(entries(&dir), ["ids.npy", "input.txt"]);
    assert!(std::fs::read(&output)
        .unwrap()
        .starts_with(b"\x93NUMPY\x01\x00"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn chunks_shrink_towards_the_end_of_a_file_and_the_ids_stay_the_same() {
    let fixture = fixture(13);
    let encoder = encoder(&fixture, MergeRule::Pair);
    let dir = std::env::temp_dir().join(format!("bpestore-tail-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (input, output) = (dir.join("input.txt"), dir.join("ids.npy"));
    let text = random_text(&mut Rng(99), 400_000); // about a megabyte
    std::fs::write(&input, &text).unwrap();
    let expected = encoder.encode(&text, AllowedSpecial::All).unwrap();
    let chunk_bytes = 1 << 18;
    let mut sizes = Vec::new();
    let count = encoder
        .encode_file_in_chunks(
            &input,
            &output,
            2,
            &mut |n| {
                sizes.push(n);
                true
            },
            chunk_bytes,
        )
        .unwrap();
    assert_eq!(count, expected.len() as u64);
    let data = std::fs::read(&output).unwrap();
    let ids: Vec<u32> = data[128..]
        .chunks(2)
        .map(|c| u16::from_le_bytes([c[0], c[1]]) as u32)
        .collect();
    assert_eq!(ids, expected);
    // Small chunks at first, growing to whole ones, then smaller ones, the last near the floor.
    assert!((sizes[0] as usize) < chunk_bytes, "{sizes:?}");
    assert!(sizes[1] > sizes[0], "{sizes:?}");
    assert!(
        sizes.iter().any(|&n| n as usize >= chunk_bytes),
        "{sizes:?}"
    );
    assert!(sizes.len() > text.len() / chunk_bytes + 2, "{sizes:?}");
    let last = sizes[sizes.len() - 2] as usize; // (the very last one is what is left)
    assert!(last < 2 * super::file::MIN_TAIL_CHUNK_BYTES, "{sizes:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_file_becomes_the_npy_of_its_ids_on_any_number_of_threads() {
    let fixture = fixture(11);
    let encoder = encoder(&fixture, MergeRule::Pair);
    let dir = std::env::temp_dir().join(format!("bpestore-encode-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let input = dir.join("input.txt");
    let output = dir.join("ids.npy");
    let mut rng = Rng(12345);
    let text = random_text(&mut rng, 3000);
    std::fs::write(&input, &text).unwrap();
    let expected = encoder.encode(&text, AllowedSpecial::All).unwrap();
    for (threads, chunk_bytes) in [(1, 1 << 20), (1, 37), (2, 100), (3, 1)] {
        let mut done = 0;
        let count = encoder
            .encode_file_in_chunks(
                &input,
                &output,
                threads,
                &mut |n| {
                    done += n;
                    true
                },
                chunk_bytes,
            )
            .unwrap();
        assert_eq!(count, expected.len() as u64);
        assert_eq!(done, text.len() as u64);
        let data = std::fs::read(&output).unwrap();
        assert_eq!(&data[..8], b"\x93NUMPY\x01\x00");
        let header = std::str::from_utf8(&data[10..128]).unwrap();
        assert!(header.starts_with(&format!(
            "{{'descr': '<u2', 'fortran_order': False, 'shape': ({count},)}}"
        )));
        let ids: Vec<u32> = data[128..]
            .chunks(2)
            .map(|c| u16::from_le_bytes([c[0], c[1]]) as u32)
            .collect();
        assert_eq!(ids, expected, "{threads} threads, chunks of {chunk_bytes}");
    }

    // Invalid UTF-8: the first bad byte of the file, whichever chunk holds it; nothing written.
    std::fs::remove_file(&output).unwrap();
    let mut bad = text.clone().into_bytes();
    let first = bad.len() / 2;
    bad[first] = 0xff;
    bad[first + 50] = 0xc3;
    let error = file_error(&encoder, &input, &output, &bad, 2, 64);
    assert!(
        matches!(error, FileError::Decode { offset, reason: "invalid start byte" } if offset == first as u64),
        "{error}"
    );
    assert!(!output.exists());
    assert_eq!(entries(&dir), ["input.txt"], "a temporary file was left");
    // A sequence cut short just before a space is a bad continuation, as Python says, not the end.
    let error = file_error(&encoder, &input, &output, b"ab ab\xe4 cd ab ab ab", 1, 3);
    assert!(
        matches!(
            error,
            FileError::Decode {
                offset: 5,
                reason: "invalid continuation byte"
            }
        ),
        "{error}"
    );
    let error = file_error(&encoder, &input, &output, b"ab ab\xe4", 1, 3);
    assert!(
        matches!(
            error,
            FileError::Decode {
                offset: 5,
                reason: "unexpected end of data"
            }
        ),
        "{error}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

// -- a custom pattern that fails on a text: an error on every path, never a panic nor lost text ---

/// The two ways a custom pattern that passed the probes at construction can fail on a text.
#[derive(Clone, Copy, Debug)]
enum Failing {
    /// `(?:a(?=b)b|a(?=b)b)+c|[\s\S]`: exponential on a run of "ab" that no "c" ends, yet fine on
    /// the construction probes (runs of one character); the look-ahead keeps it on the
    /// backtracking engine.
    Backtracking,
    /// `[^\s\p{Braille}]+|\s`: covers every probe, but no Braille pattern (encoding would drop
    /// them).
    Uncovered,
}

const FAILING: [Failing; 2] = [Failing::Backtracking, Failing::Uncovered];

impl Failing {
    fn pattern(self) -> &'static str {
        match self {
            Failing::Backtracking => r"(?:a(?=b)b|a(?=b)b)+c|[\s\S]",
            Failing::Uncovered => r"[^\s\p{Braille}]+|\s",
        }
    }

    /// A text on which the pattern fails at byte 2: the match there gives up (2^20 steps there;
    /// 100 on a run of three "ab"), or no match covers U+2801 there.
    fn bad_text(self) -> String {
        match self {
            Failing::Backtracking => format!("xy{}d", "ab".repeat(20)),
            Failing::Uncovered => "xy\u{2801}d".to_string(),
        }
    }

    fn failure(self) -> MatchFailure {
        match self {
            Failing::Backtracking => MatchFailure::Backtracking,
            Failing::Uncovered => MatchFailure::Uncovered('\u{2801}'),
        }
    }

    /// An encoder of single bytes with `<|endoftext|>` (id 256), pre-tokenizing with the pattern
    /// and a backtracking limit of 10^4 steps (cheap to reach).
    fn encoder(self) -> Encoder {
        let vocab: Vec<(TokenId, Bytes)> = (0..=255u8).map(|b| (b.into(), vec![b])).collect();
        let mut encoder = Encoder::new(
            vocab,
            Vec::new(),
            vec![(EOT.into(), 256)],
            self.pattern(),
            MergeRule::Pair,
        )
        .unwrap();
        encoder.pretokenizer = Pretokenizer::with_backtrack_limit(self.pattern(), 10_000).unwrap();
        encoder
    }

    /// The offset and the text named by `error`, a [`PretokenizeError::MatchFailed`] of this
    /// pattern failing this way.
    fn failed_at(self, error: &PretokenizeError) -> (usize, String) {
        match error {
            PretokenizeError::MatchFailed {
                pattern,
                failure,
                text,
                offset: Some(offset),
            } => {
                assert_eq!(
                    (pattern.as_str(), *failure),
                    (self.pattern(), self.failure())
                );
                (*offset, text.clone())
            }
            other => panic!("{self:?}: not a failed match with an offset: {other:?}"),
        }
    }

    fn encode_failed_at(self, error: &EncodeError) -> (usize, String) {
        match error {
            EncodeError::MatchFailed(error) => self.failed_at(error),
            other => panic!("{self:?}: not a failed match: {other:?}"),
        }
    }
}

/// Fine text (runs of at most one "ab") with a special token every few words.
fn fine_text(rng: &mut Rng, words: usize) -> String {
    const PARTS: [&str; 8] = ["ab ", "abc", "x", " ", "\n", EOT, "yab", "é"];
    (0..words).map(|_| PARTS[rng.below(PARTS.len())]).collect()
}

#[test]
fn encoding_a_text_the_pattern_fails_on_is_an_error_at_its_offset_in_the_text() {
    for case in FAILING {
        let encoder = case.encoder();
        let text = format!("abc{EOT}{}", case.bad_text());
        let at = text.find("xy").unwrap() + 2;
        let policies = [
            AllowedSpecial::All,
            AllowedSpecial::None,
            AllowedSpecial::Only(&[EOT]),
        ];
        for allowed in policies {
            let error = encoder.encode(&text, allowed).unwrap_err();
            assert_eq!(
                case.encode_failed_at(&error),
                (at, format!("a text of {} bytes", text.len()))
            );
            assert!(
                error
                    .to_string()
                    .contains(&format!("at byte {at} of a text of {} bytes", text.len())),
                "{error}"
            );
            let error = encoder.encode_with_offsets(&text, allowed).unwrap_err();
            assert_eq!(case.encode_failed_at(&error).0, at);
        }
        // The encoder is as good as before.
        let fine = format!("abcd{EOT}");
        assert_eq!(
            encoder.encode(&fine, AllowedSpecial::All).unwrap(),
            [97, 98, 99, 100, 256]
        );
    }
}

#[test]
fn a_batch_names_its_first_text_the_pattern_fails_on() {
    for case in FAILING {
        let encoder = case.encoder();
        let mut rng = Rng(31);
        let mut texts: Vec<String> = (0..120).map(|i| fine_text(&mut rng, i % 30)).collect();
        // Two bad texts: the first in the batch's order is the one named, whichever thread has it.
        let bad = format!("{EOT}ab {}", case.bad_text());
        let at = bad.find("xy").unwrap() + 2;
        texts[37] = bad.clone();
        texts[90] = case.bad_text();
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        for threads in [1, 2, 3] {
            let error = encoder.encode_batch(&refs, threads).unwrap_err();
            assert_eq!(error.index, 37, "{threads} threads");
            assert_eq!(
                case.encode_failed_at(&error.error),
                (at, format!("a text of {} bytes", bad.len()))
            );
            assert!(error.to_string().starts_with("text 37: "), "{error}");
            let mut taken = Vec::new();
            let result = encoder.encode_batch_overlapped(
                &refs,
                threads,
                AllowedSpecial::All,
                |next| next(),
                |block| {
                    taken.extend(block.first..block.first + block.texts().count());
                    Ok::<(), ()>(())
                },
            );
            match result {
                Err(OverlappedError::Encode(error)) => {
                    assert_eq!(error.index, 37, "{threads} threads");
                    assert_eq!(case.encode_failed_at(&error.error).0, at);
                }
                other => panic!("{other:?}"),
            }
            assert!(!taken.contains(&37), "{threads} threads");
        }
        // Without the bad texts, the same batch is encoded.
        texts[37] = "fine".into();
        texts[90] = "fine".into();
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        let one_by_one: Vec<Vec<TokenId>> = refs
            .iter()
            .map(|t| encoder.encode(t, AllowedSpecial::All).unwrap())
            .collect();
        assert_eq!(encoder.encode_batch(&refs, 2).unwrap(), one_by_one);
    }
}

#[test]
fn a_stream_fed_in_pieces_names_the_offset_in_the_whole_stream() {
    for case in FAILING {
        let encoder = case.encoder();
        let mut rng = Rng(32);
        let head = fine_text(&mut rng, 400);
        let text = format!(
            "{head}{EOT}{}{EOT}{}",
            case.bad_text(),
            fine_text(&mut rng, 50)
        );
        let at = head.len() + EOT.len() + 2;
        for block in [1, 16, 200] {
            let mut state = StreamState::with_block(block);
            let mut position = 0;
            let mut ids = Vec::new();
            let error = loop {
                let mut end = (position + 1 + rng.below(30)).min(text.len());
                while !text.is_char_boundary(end) {
                    end += 1;
                }
                let fed = if position == text.len() {
                    state.finish(&encoder)
                } else {
                    state.feed(&encoder, &text[position..end])
                };
                position = end;
                match fed {
                    Ok(more) => ids.extend(more),
                    Err(error) => break error,
                }
            };
            assert!(ids.len() < at, "the ids before it, at most");
            assert_eq!(
                case.encode_failed_at(&error),
                (at, "the stream".to_string()),
                "block {block}"
            );
        }
        // The crate's StreamEncoder too, fed the whole text at once.
        let mut stream = encoder.stream();
        let error = match stream.feed(&text) {
            Err(error) => error,
            Ok(_) => stream.finish().unwrap_err(),
        };
        assert_eq!(case.encode_failed_at(&error).0, at);
    }
}

#[test]
fn a_file_names_the_offset_in_the_file_and_leaves_nothing() {
    for case in FAILING {
        let encoder = case.encoder();
        let dir =
            std::env::temp_dir().join(format!("bpestore-pattern-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (input, output) = (dir.join("input.txt"), dir.join("ids.npy"));
        let mut rng = Rng(33);
        // Chunks of about 1000 bytes are cut at special tokens: the bad text is far past the first.
        let head: String = (0..200).map(|_| fine_text(&mut rng, 20) + EOT).collect();
        let tail: String = (0..50).map(|_| fine_text(&mut rng, 20) + EOT).collect();
        let content = format!("{head}{}{EOT}{tail}{}", case.bad_text(), case.bad_text());
        let at = head.len() + 2;
        assert!(at > 5000);
        for threads in [1, 2, 3] {
            match file_error(&encoder, &input, &output, content.as_bytes(), threads, 1000) {
                FileError::Pattern(error) => {
                    assert_eq!(case.failed_at(&error), (at, "the file".to_string()))
                }
                other => panic!("{other:?}"),
            }
            assert_eq!(entries(&dir), ["input.txt"], "{threads} threads");
        }
        // Without the bad texts, the file is encoded as the whole text is.
        let fine = format!("{head}{tail}");
        std::fs::write(&input, &fine).unwrap();
        let count = encoder
            .encode_file_in_chunks(&input, &output, 2, &mut |_| true, 1000)
            .unwrap();
        let expected = encoder.encode(&fine, AllowedSpecial::All).unwrap();
        assert_eq!(count, expected.len() as u64);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

// -- warm tables (warm.rs) ---------------------------------------------------------------------

/// The distinct pre-tokens of `texts`, as the encoder would meet them.
fn pieces_of(encoder: &Encoder, texts: &[String]) -> Vec<Vec<u8>> {
    let mut pieces: Vec<Vec<u8>> = Vec::new();
    for text in texts {
        for piece in encoder.pretokenizer().pieces(text) {
            if !pieces.iter().any(|seen| seen == piece.as_bytes()) {
                pieces.push(piece.as_bytes().to_vec());
            }
        }
    }
    pieces
}

/// A warm table written by hand: `entries` of (piece, ids), with `fingerprint`.
fn raw_table(fingerprint: u64, entries: &[(&[u8], &[u32])]) -> Vec<u8> {
    let mut data = WARM_MAGIC.to_vec();
    data.extend_from_slice(&fingerprint.to_le_bytes());
    data.extend_from_slice(&(entries.len() as u32).to_le_bytes());
    for (piece, _) in entries {
        data.extend_from_slice(&(piece.len() as u32).to_le_bytes());
    }
    for (_, ids) in entries {
        data.extend_from_slice(&(ids.len() as u32).to_le_bytes());
    }
    for (piece, _) in entries {
        data.extend_from_slice(piece);
    }
    for (_, ids) in entries {
        for id in ids.iter() {
            data.extend_from_slice(&id.to_le_bytes());
        }
    }
    data
}

#[test]
fn a_warm_table_gives_the_ids_merging_gives() {
    for seed in 0..25 {
        let fixture = fixture(seed);
        for rule in [MergeRule::Pair, MergeRule::Token] {
            let cold = encoder(&fixture, rule);
            let mut rng = Rng(seed + 100);
            let texts: Vec<String> = (0..40).map(|_| random_text(&mut rng, 30)).collect();
            // Warm with the pieces of half the texts: the others meet pieces it lacks too.
            let pieces = pieces_of(&cold, &texts[..20]);
            let slices: Vec<&[u8]> = pieces.iter().map(Vec::as_slice).collect();
            let (table, held) = cold.pack_warm(&slices, usize::MAX);
            let warm = encoder(&fixture, rule);
            assert_eq!(warm.load_warm(&table), Ok(held));
            assert_eq!(warm.warm_len(), held);
            assert!(
                held > 0 && held <= pieces.len(),
                "{held} of {}",
                pieces.len()
            );
            for text in &texts {
                let expected = cold.encode(text, AllowedSpecial::All).unwrap();
                assert_eq!(
                    warm.encode(text, AllowedSpecial::All).unwrap(),
                    expected,
                    "{text:?}"
                );
                assert_eq!(
                    warm.encode(text, AllowedSpecial::None).unwrap(),
                    cold.encode(text, AllowedSpecial::None).unwrap()
                );
            }
            let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
            assert_eq!(
                warm.encode_batch(&refs, 3).unwrap(),
                cold.encode_batch(&refs, 1).unwrap()
            );
            // A limit keeps the first pieces only.
            let (_, few) = cold.pack_warm(&slices, 3);
            assert_eq!(few, 3.min(held));
        }
    }
}

#[test]
fn a_table_for_another_model_or_a_damaged_one_is_refused_whole() {
    let fixture_a = fixture(7);
    let cold = encoder(&fixture_a, MergeRule::Pair);
    let mut rng = Rng(8);
    let texts: Vec<String> = (0..10).map(|_| random_text(&mut rng, 30)).collect();
    let pieces = pieces_of(&cold, &texts);
    let slices: Vec<&[u8]> = pieces.iter().map(Vec::as_slice).collect();
    let (table, _) = cold.pack_warm(&slices, usize::MAX);

    // Another model (other merges), and the same vocabulary under the other rule.
    let other = encoder(&fixture(8), MergeRule::Pair);
    assert!(other
        .load_warm(&table)
        .unwrap_err()
        .contains("another model"));
    let token_rule = encoder(&fixture_a, MergeRule::Token);
    assert!(token_rule
        .load_warm(&table)
        .unwrap_err()
        .contains("another model"));
    assert_eq!(token_rule.warm_len(), 0);

    // Cut short anywhere, or with bytes after its end.
    // (a refused table leaves the encoder without one: the same encoder serves every case)
    let fresh = encoder(&fixture_a, MergeRule::Pair);
    for cut in 0..table.len() {
        assert!(fresh.load_warm(&table[..cut]).is_err(), "cut at {cut}");
        assert_eq!(fresh.warm_len(), 0);
    }
    let mut longer = table.clone();
    longer.push(0);
    assert!(encoder(&fixture_a, MergeRule::Pair)
        .load_warm(&longer)
        .unwrap_err()
        .contains("follow its end"));

    // Any byte changed: refused, or (if the change leaves a well-formed table whose ids still
    // spell their pieces) taken, and then every text still decodes to itself.
    let mut fresh = fresh;
    for at in 0..table.len() {
        let mut spoiled = table.clone();
        spoiled[at] ^= 0x5a;
        if fresh.load_warm(&spoiled).is_ok() {
            for text in &texts {
                let ids = fresh.encode(text, AllowedSpecial::All).unwrap();
                assert_eq!(fresh.decode_bytes(&ids).unwrap(), text.as_bytes());
            }
            fresh = encoder(&fixture_a, MergeRule::Pair);
        }
    }

    // Written by hand: each rule of the layout.
    let fingerprint = cold.fingerprint();
    let id = |token: &[u8]| cold.vocab.id(token).unwrap();
    let (a, b) = (id(b"a"), id(b"b"));
    let eot = cold.special_id(EOT);
    let entry = |piece: &[u8], ids: &[u32]| (piece.to_vec(), ids.to_vec());
    type Entries = Vec<(Vec<u8>, Vec<u32>)>;
    let cases: Vec<(Entries, &str)> = vec![
        (
            vec![entry(b"ab", &[a, b]), entry(b"ab", &[a, b])],
            "given twice",
        ),
        (vec![entry(b"ab", &[b, a])], "do not spell"),
        (vec![entry(b"ab", &[a])], "do not spell"),
        (vec![entry(b"a", &[a])], "has 1 bytes"),
        (vec![entry(&[b'a'; 65], &[a; 65])], "has 65 bytes"),
        (vec![entry(b"ab", &[])], "0 ids"),
        (vec![entry(b"abc", &[a, b, b, a])], "4 ids for 3 bytes"),
        (vec![entry(b"ab", &[a, 1 << 30])], "no ordinary token"),
        (vec![entry(EOT.as_bytes(), &[eot])], "no ordinary token"),
    ];
    for (entries, message) in cases {
        let borrowed: Vec<(&[u8], &[u32])> = entries
            .iter()
            .map(|(piece, ids)| (piece.as_slice(), ids.as_slice()))
            .collect();
        let error = encoder(&fixture_a, MergeRule::Pair)
            .load_warm(&raw_table(fingerprint, &borrowed))
            .unwrap_err();
        assert!(error.contains(message), "{error} (expected {message:?})");
    }
    let mut magic = table.clone();
    magic[7] = 2;
    assert!(encoder(&fixture_a, MergeRule::Pair)
        .load_warm(&magic)
        .unwrap_err()
        .contains("not a warm table"));

    // One table per encoder.
    let warm = encoder(&fixture_a, MergeRule::Pair);
    assert!(warm.load_warm(&table).is_ok());
    assert!(warm.load_warm(&table).unwrap_err().contains("already"));
}

#[test]
fn the_fingerprint_is_the_model_and_nothing_else() {
    let fixture = fixture(3);
    let a = encoder(&fixture, MergeRule::Pair);
    assert_eq!(
        a.fingerprint(),
        encoder(&fixture, MergeRule::Pair).fingerprint()
    );
    // The vocabulary given in another order is the same model.
    let mut shuffled = fixture.tokens.clone();
    shuffled.reverse();
    let reordered = Encoder::new(
        shuffled,
        fixture.merges.clone(),
        fixture.specials.clone(),
        bpestore_pretokenize::GPT2_PATTERN,
        MergeRule::Pair,
    )
    .unwrap();
    assert_eq!(reordered.fingerprint(), a.fingerprint());
    // The merges in another order are not (the token rule reads none).
    let mut merges = fixture.merges.clone();
    merges.swap(0, 1);
    let swapped = |rule| {
        Encoder::new(
            fixture.tokens.clone(),
            merges.clone(),
            fixture.specials.clone(),
            bpestore_pretokenize::GPT2_PATTERN,
            rule,
        )
        .unwrap()
        .fingerprint()
    };
    assert_ne!(swapped(MergeRule::Pair), a.fingerprint());
    assert_eq!(
        swapped(MergeRule::Token),
        encoder(&fixture, MergeRule::Token).fingerprint()
    );
    assert_ne!(
        encoder(&fixture, MergeRule::Token).fingerprint(),
        a.fingerprint()
    );
}

#[test]
fn a_medium_piece_is_never_taken_for_the_short_piece_its_first_bytes_spell() {
    // The batch's loop compares a piece's first key word with the short slot its hash names
    // before it asks how long the piece is: a medium piece's first word must then never be a
    // short key. Here a medium piece starts with the bytes of a short key (a short piece, zeros,
    // its length), that short piece is cached in the very slot the medium piece's lookup reads
    // first (slot 0 of a fresh cache's table), and every id must still be its byte's.
    let encoder = Encoder::new(
        (0..=255u8).map(|b| (u32::from(b), vec![b])).collect(),
        Vec::new(),
        Vec::new(),
        bpestore_pretokenize::GPT2_PATTERN,
        MergeRule::Pair,
    )
    .unwrap();
    let punctuation: Vec<u8> = (b'!'..=b'/').chain(b':'..=b'@').collect();
    let at_slot_0 = |piece: &[u8]| {
        let key = cache::short_key(piece).unwrap();
        crate::mix::mix(key) as usize & (cache::FIRST_SLOTS - 1) == 0
    };
    let mut threes = Vec::new();
    for &a in &punctuation {
        for &b in &punctuation {
            for &c in &punctuation {
                threes.push(vec![a, b, c]);
            }
        }
    }
    let short = threes
        .into_iter()
        .find(|piece| at_slot_0(piece))
        .expect("one of 3,375 pieces hashes to slot 0");
    let mut medium = short.clone();
    medium.extend([0u8; 12]);
    medium.push(short.len() as u8);
    medium.extend(b"!!");
    let text = [
        &short[..],
        b"\n",
        &medium,
        b"\n",
        &short,
        b"\n",
        &medium,
        b" and some words after it",
    ]
    .concat();
    let text = String::from_utf8(text).unwrap();
    let bytes: Vec<u32> = text.bytes().map(u32::from).collect();
    for _ in 0..2 {
        // (the second time from the cache)
        assert_eq!(encoder.encode(&text, AllowedSpecial::None).unwrap(), bytes);
    }
}
