//! Unit tests. Expected pieces below are worked out by hand from the patterns' definitions (and
//! agree with Python's `regex.findall`); the property tests check the cut rule on generated text.

use super::*;

fn pieces(pattern: &str, text: &str) -> Vec<String> {
    let pretokenizer = Pretokenizer::new(pattern).unwrap();
    pretokenizer
        .pieces(text)
        .into_iter()
        .map(str::to_string)
        .collect()
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|item| item.to_string()).collect()
}

/// The pre-tokens of `text` with special tokens cut out first, each special token a piece.
fn all_pieces<'t>(
    text: &'t str,
    pretokenizer: &Pretokenizer,
    specials: &SpecialTokens,
) -> Vec<&'t str> {
    let mut result = Vec::new();
    for part in specials.split(text) {
        match part {
            Part::Text(text) => pretokenizer.for_each_piece(text, |piece| result.push(piece)),
            Part::Special { text, .. } => result.push(text),
        }
    }
    result
}

/// Cutting `whole` at `cut` and pre-tokenizing both sides on their own gives the whole's pieces.
fn assert_cut_is_safe(
    whole: &str,
    cut: usize,
    pretokenizer: &Pretokenizer,
    specials: &SpecialTokens,
    context: &str,
) {
    let mut parts = all_pieces(&whole[..cut], pretokenizer, specials);
    parts.extend(all_pieces(&whole[cut..], pretokenizer, specials));
    assert_eq!(
        parts,
        all_pieces(whole, pretokenizer, specials),
        "{context}: {whole:?} cut at {cut}"
    );
}

#[test]
fn gpt2_pieces() {
    assert_eq!(
        pieces(GPT2_PATTERN, "Hello world's  test\n\n"),
        strings(&["Hello", " world", "'s", " ", " test", "\n\n"])
    );
    // Contractions are case-sensitive in GPT-2: "'S" is punctuation then a letter.
    assert_eq!(pieces(GPT2_PATTERN, "IT'S"), strings(&["IT", "'", "S"]));
    assert_eq!(pieces(GPT2_PATTERN, " 123abc"), strings(&[" 123", "abc"]));
    // \x1c-\x1f are not whitespace to `regex` (nor letters or numbers): punctuation.
    assert_eq!(
        pieces(GPT2_PATTERN, "a\x1cb \x1f"),
        strings(&["a", "\x1c", "b", " \x1f"])
    );
    // A run of whitespace gives its last space to the word after it.
    assert_eq!(
        pieces(GPT2_PATTERN, "a \u{3000} b"),
        strings(&["a", " \u{3000}", " b"])
    );
    assert_eq!(
        pieces(GPT2_PATTERN, "a\n\n b"),
        strings(&["a", "\n\n", " b"])
    );
    assert_eq!(pieces(GPT2_PATTERN, "   "), strings(&["   "]));
    assert_eq!(pieces(GPT2_PATTERN, ""), Vec::<String>::new());
}

#[test]
fn cl100k_pieces() {
    // "\n " at the end of the text is one piece (\s++$); before a word the space goes to it.
    assert_eq!(pieces(CL100K_PATTERN, "a\n "), strings(&["a", "\n "]));
    assert_eq!(pieces(CL100K_PATTERN, "a\n b"), strings(&["a", "\n", " b"]));
    assert_eq!(pieces(CL100K_PATTERN, "12345"), strings(&["123", "45"]));
    assert_eq!(pieces(CL100K_PATTERN, "DON'T"), strings(&["DON", "'T"]));
    // Any one character that is not a letter, digit or newline may lead a word.
    assert_eq!(pieces(CL100K_PATTERN, "$hello"), strings(&["$hello"]));
    assert_eq!(
        pieces(CL100K_PATTERN, "x !!\n\ny"),
        strings(&["x", " !!\n\n", "y"])
    );
    assert_eq!(
        pieces(CL100K_PATTERN, "a  \tb"),
        strings(&["a", "  ", "\tb"])
    );
}

#[test]
fn o200k_pieces() {
    assert_eq!(
        pieces(O200K_PATTERN, "CamelCase"),
        strings(&["Camel", "Case"])
    );
    assert_eq!(
        pieces(O200K_PATTERN, "I'M here"),
        strings(&["I'M", " here"])
    );
    assert_eq!(pieces(O200K_PATTERN, "1234"), strings(&["123", "4"]));
    assert_eq!(
        pieces(O200K_PATTERN, "a/b //\n"),
        strings(&["a", "/b", " //\n"])
    );
}

#[test]
fn other_patterns_and_errors() {
    assert_eq!(
        pieces(r"\w+|\s+|.", "ab, c"),
        strings(&["ab", ",", " ", "c"])
    );
    // Empty matches make no pre-token.
    assert_eq!(pieces(r"[^a]|a*", "baab"), strings(&["b", "aa", "b"]));
    let error = Pretokenizer::new("(").unwrap_err();
    assert!(
        matches!(error, PretokenizeError::InvalidPattern { ref pattern, .. } if pattern == "(")
    );
    assert!(error.to_string().contains("invalid pre-tokenizer pattern"));
    assert!(Pretokenizer::new(GPT2_PATTERN).unwrap().is_split_safe());
    assert!(!Pretokenizer::new(r"\w+|\s+|.").unwrap().is_split_safe());
    assert_eq!(
        Pretokenizer::new(O200K_PATTERN).unwrap().pattern(),
        O200K_PATTERN
    );
}

#[test]
fn whitespace_is_regex_modules_backslash_s() {
    for c in [
        '\t', '\n', '\x0b', '\x0c', '\r', ' ', '\u{85}', '\u{a0}', '\u{2007}', '\u{3000}',
    ] {
        assert!(is_regex_whitespace(c), "{c:?}");
    }
    for c in [
        '\x1c', '\x1d', '\x1e', '\x1f', '\u{200b}', '\u{180e}', 'a', '\u{feff}',
    ] {
        assert!(!is_regex_whitespace(c), "{c:?}");
    }
    // The same set as the regex engine's \s, over all of Unicode.
    let regex = fancy_regex::Regex::new(r"^\s$").unwrap();
    for c in (0..=0x10FFFFu32).filter_map(char::from_u32) {
        assert_eq!(
            is_regex_whitespace(c),
            regex.is_match(c.encode_utf8(&mut [0; 4])).unwrap(),
            "{c:?}"
        );
    }
}

#[test]
fn special_tokens_longest_first() {
    let specials = SpecialTokens::new(&strings(&["<|endoftext|>", "<|endoftext|><|endoftext|>"]));
    let parts: Vec<Part> = specials
        .split("a<|endoftext|><|endoftext|><|endoftext|>b")
        .collect();
    assert_eq!(
        parts,
        vec![
            Part::Text("a"),
            Part::Special {
                index: 1,
                text: "<|endoftext|><|endoftext|>"
            },
            Part::Special {
                index: 0,
                text: "<|endoftext|>"
            },
            Part::Text("b"),
        ]
    );
    assert_eq!(specials.longest_len(), 26);
    assert!(!specials.is_empty());
    assert!(!specials.any_has_space());
    let parts: Vec<Part> = specials.split("<|endoftext|").collect();
    assert_eq!(parts, vec![Part::Text("<|endoftext|")]);
    assert_eq!(specials.split("").count(), 0);
}

#[test]
fn tokens_with_few_openings_are_found_as_the_automaton_finds_them() {
    // GPT-NeoX's shape: runs of spaces and a few "|||...|||" tokens, two openings in all, which
    // are looked for before the automaton runs; and a set with a one-byte token, which has none.
    let mut nasty = Nasty::new(11);
    for tokens in [
        vec!["  ", "   ", "    ", "|||EMAIL|||", "|||IP|||"],
        vec!["  ", "|", "<s>"],
    ] {
        let specials = SpecialTokens::new(&strings(&tokens));
        for _ in 0..3000 {
            let mut text = nasty.text(10);
            if nasty.below(3) == 0 {
                let at = (0..=text.len() / 2)
                    .rev()
                    .find(|&at| text.is_char_boundary(at))
                    .unwrap_or(0);
                text.insert_str(at, tokens[nasty.below(tokens.len())]);
            }
            let found: Vec<Part> = specials.split(&text).collect();
            let mut expected = Vec::new();
            let mut position = 0;
            // (the reference: the leftmost, then longest, token at each step, by plain search)
            while position < text.len() {
                let next = (position..text.len())
                    .filter(|&at| text.is_char_boundary(at))
                    .find_map(|at| {
                        let mut here: Vec<usize> = (0..tokens.len())
                            .filter(|&i| text[at..].starts_with(tokens[i]))
                            .collect();
                        here.sort_by_key(|&i| std::cmp::Reverse(tokens[i].len()));
                        here.first().map(|&i| (at, i))
                    });
                match next {
                    Some((at, index)) => {
                        if at > position {
                            expected.push(Part::Text(&text[position..at]));
                        }
                        expected.push(Part::Special {
                            index,
                            text: &text[at..at + tokens[index].len()],
                        });
                        position = at + tokens[index].len();
                    }
                    None => {
                        expected.push(Part::Text(&text[position..]));
                        position = text.len();
                    }
                }
            }
            assert_eq!(found, expected, "{text:?}");
        }
    }
}

#[test]
fn special_tokens_edge_cases() {
    // Duplicates report the first index; empty tokens are ignored.
    let specials = SpecialTokens::new(&strings(&["", "<s>", "<s>", "s> x"]));
    assert_eq!(specials.tokens().len(), 4);
    assert!(specials.any_has_space());
    let parts: Vec<Part> = specials.split("<s> x<s>").collect();
    assert_eq!(
        parts,
        vec![
            Part::Special {
                index: 1,
                text: "<s>"
            },
            Part::Text(" x"),
            Part::Special {
                index: 1,
                text: "<s>"
            },
        ]
    );
    let none = SpecialTokens::none();
    assert!(none.is_empty());
    assert_eq!(none.longest_len(), 0);
    assert_eq!(
        none.split("abc").collect::<Vec<_>>(),
        vec![Part::Text("abc")]
    );
    assert!(SpecialTokens::new(&strings(&[""])).is_empty());
}

#[test]
fn last_safe_cut_examples() {
    let gpt2 = Pretokenizer::new(GPT2_PATTERN).unwrap();
    let none = SpecialTokens::none();
    assert_eq!(last_safe_cut("hello world foo", &gpt2, &none), 11);
    // Spaces next to whitespace are no cut.
    assert_eq!(last_safe_cut("hello world  foo", &gpt2, &none), 5);
    assert_eq!(last_safe_cut("hello world\u{a0} foo", &gpt2, &none), 5);
    // "\x1c" is not whitespace, so a space beside it is a cut.
    assert_eq!(last_safe_cut("hello \x1c foo", &gpt2, &none), 7);
    // A space ending the text may be followed by more whitespace.
    assert_eq!(last_safe_cut("hello world ", &gpt2, &none), 5);
    assert_eq!(last_safe_cut("hello", &gpt2, &none), 0);
    assert_eq!(last_safe_cut(" hello", &gpt2, &none), 0);
    assert_eq!(last_safe_cut("", &gpt2, &none), 0);

    let eot = SpecialTokens::new(&strings(&["<|endoftext|>"]));
    // A special token may still arrive within the last 13 bytes: "hi <|endof" + "text|>".
    assert_eq!(last_safe_cut("aaa hi <|endof", &gpt2, &eot), 0);
    let text = "aaa hi <|endoftext|>the end of it";
    // The space before the special token ends its piece of text: no cut; the one after it is.
    assert_eq!(last_safe_cut(text, &gpt2, &eot), 3);
    let text = "aaa hi <|endoftext|> the end of the text";
    assert_eq!(last_safe_cut(text, &gpt2, &eot), 24);

    // A special token that contains spaces: no cut inside it.
    let spaced = SpecialTokens::new(&strings(&["<| a b |>"]));
    let text = "xx <| a b |>yy";
    assert_eq!(
        last_safe_cut(&format!("{text}0123456789"), &gpt2, &spaced),
        0
    );
    let text = "xx yy<| a b |>zz0123456789";
    assert_eq!(last_safe_cut(text, &gpt2, &spaced), 2);

    // Other patterns: only special tokens' starts, ending far enough from the end.
    let words = Pretokenizer::new(r"\w+|\s+|.").unwrap();
    assert_eq!(
        last_safe_cut("a b c d e f g h i j k l m n o p", &words, &eot),
        0
    );
    let text = "a b<|endoftext|>c d<|endoftext|>0123456789ab";
    assert_eq!(last_safe_cut(text, &words, &eot), 3);
    let text = "a b<|endoftext|>c d<|endoftext|>0123456789abc";
    assert_eq!(last_safe_cut(text, &words, &eot), 19);
}

#[test]
fn next_safe_cut_examples() {
    let gpt2 = Pretokenizer::new(GPT2_PATTERN).unwrap();
    let none = SpecialTokens::none();
    let text = b"hello world  again. ok";
    assert_eq!(next_safe_cut(text, 0, &gpt2, &none), Some(5));
    assert_eq!(next_safe_cut(text, 6, &gpt2, &none), Some(19));
    assert_eq!(next_safe_cut(text, 20, &gpt2, &none), None);
    // Any characters but whitespace beside the space, if whole in the window (which may cut a
    // character in half at its start).
    assert_eq!(
        next_safe_cut("é é a b".as_bytes(), 0, &gpt2, &none),
        Some(2)
    );
    assert_eq!(
        next_safe_cut(&"é é a b".as_bytes()[1..], 0, &gpt2, &none),
        Some(4)
    );
    assert_eq!(
        next_safe_cut("a\u{3000} b c".as_bytes(), 0, &gpt2, &none),
        Some(6)
    );
    // After a newline between non-whitespace (not before "/", which o200k's punctuation takes).
    let lines = "中文。\n日本語\n/x\n\ny\r\nz\nw";
    let cuts: Vec<usize> = (0..lines.len())
        .filter_map(|from| next_safe_cut(lines.as_bytes(), from, &gpt2, &none))
        .collect();
    let first_line = "中文。\n".len();
    let last_line = lines.len() - 1;
    assert!(
        cuts.iter()
            .all(|&cut| cut == first_line || cut == last_line),
        "{cuts:?}"
    );
    assert_eq!(
        next_safe_cut(lines.as_bytes(), 0, &gpt2, &none),
        Some(first_line)
    );
    assert_eq!(last_safe_cut(lines, &gpt2, &none), last_line);
    let newline_token = SpecialTokens::new(&strings(&["<\n>"]));
    assert_eq!(
        next_safe_cut(b"ab\ncd\nef<\n>gh", 0, &gpt2, &newline_token),
        Some(8)
    );

    let tokens = SpecialTokens::new(&strings(&["<|endoftext|>", "text"]));
    let window = b"xx<|endoftext|>yy text and more padding here";
    assert_eq!(next_safe_cut(window, 0, &gpt2, &tokens), Some(2));
    // "text" inside "<|endoftext|>" is covered by it; the later one is a cut (no space after
    // "yy" precedes it: the space is followed by the special token).
    assert_eq!(next_safe_cut(window, 5, &gpt2, &tokens), Some(18));
    assert_eq!(next_safe_cut(b"xx yy", 0, &gpt2, &tokens), None);

    // Overlapping specials: the second "<|endoftext|>" of a pair is covered by the pair.
    let pair = SpecialTokens::new(&strings(&["<|endoftext|>", "<|endoftext|><|endoftext|>"]));
    let window = b"a<|endoftext|><|endoftext|>bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
    assert_eq!(next_safe_cut(window, 2, &gpt2, &pair), None);
    assert_eq!(next_safe_cut(window, 1, &gpt2, &pair), Some(1));

    // Not split-safe: special tokens only; with a spaced special token: special tokens only.
    let words = Pretokenizer::new(r"\w+|\s+|.").unwrap();
    let window = b"a b c <|endoftext|> d e f g h i j k l m n";
    assert_eq!(next_safe_cut(window, 0, &words, &tokens), Some(6));
    let spaced = SpecialTokens::new(&strings(&["<| a b |>"]));
    let window = b"a b c <| a b |> d e f g h i j k l m n";
    assert_eq!(next_safe_cut(window, 0, &gpt2, &spaced), Some(6));
}

#[test]
fn check_utf8_reasons_like_python() {
    assert_eq!(check_utf8("héllo".as_bytes()), Ok("héllo"));
    let error = |bytes: &[u8]| check_utf8(bytes).unwrap_err();
    let at = |offset, reason| Utf8Error { offset, reason };
    assert_eq!(error(b"ab\x80"), at(2, "invalid start byte"));
    assert_eq!(error(b"ab\xc0\x80"), at(2, "invalid start byte"));
    assert_eq!(error(b"ab\xff"), at(2, "invalid start byte"));
    assert_eq!(error(b"ab\xc3("), at(2, "invalid continuation byte"));
    assert_eq!(error(b"\xe0\x80\x80"), at(0, "invalid continuation byte")); // overlong
    assert_eq!(error(b"x\xed\xa0\x80"), at(1, "invalid continuation byte")); // surrogate
    assert_eq!(
        error(b"\xf4\x90\x80\x80"),
        at(0, "invalid continuation byte")
    ); // > U+10FFFF
    assert_eq!(error(b"ab\xe2\x82"), at(2, "unexpected end of data"));
    assert_eq!(error(b"\xf0\x9f\x98"), at(0, "unexpected end of data"));
    assert_eq!(error(b"\xf0\x9f\x98x"), at(0, "invalid continuation byte"));
}

/// A small deterministic generator of nasty text (xorshift), for the property tests.
pub(crate) struct Nasty(u64);

/// Characters and strings that exercise every branch of the three patterns.
pub(crate) const ATOMS: &[&str] = &[
    "a",
    "Z",
    "x",
    "é",
    "ß",
    "Я",
    "中",
    "ǅ",
    "ʰ",
    "\u{301}",
    "ſ",
    "\u{212a}",
    "\u{130}",
    "٣",
    "1",
    "12",
    "Ⅻ",
    "'",
    "'s",
    "'S",
    "'ll",
    "'Re",
    " ",
    " ",
    "  ",
    "\n",
    "\r\n",
    "\r",
    "\t",
    "\x0b",
    "\u{85}",
    "\u{a0}",
    "\u{3000}",
    "\u{2028}",
    "\x1c",
    "\x1f",
    "!",
    "?!",
    "/",
    "\u{200b}",
    "😀",
    "\u{e000}",
    "\u{378}",
    "<|endoftext|>",
    "<|endoftext|><|endoftext|>",
    "<| sp |>",
    "<|",
    "|>",
    "don't",
    "Hello",
    " world",
    "'ſ",
    "'ve",
    "'D",
    "'m",
    "'LL",
    "'re",
    "ⅰ",
    "\r\n/",
    " /",
    "A",
    "ǈ",
    "ᵃ",
    "\u{903}",
];

impl Nasty {
    pub(crate) fn new(seed: u64) -> Nasty {
        Nasty(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub(crate) fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    pub(crate) fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    /// A text of up to `atoms` atoms, also using random code points now and then.
    pub(crate) fn text(&mut self, atoms: usize) -> String {
        let mut text = String::new();
        for _ in 0..self.below(atoms + 1) {
            if self.below(8) == 0 {
                let code = match self.below(3) {
                    0 => self.below(0x80) as u32,
                    1 => self.below(0x3400) as u32,
                    _ => self.below(0x110000) as u32,
                };
                text.extend(char::from_u32(code));
            } else {
                text.push_str(ATOMS[self.below(ATOMS.len())]);
            }
        }
        text
    }
}

/// Asserts that a hand-written pass (`by_hand`, called on a text with a span callback) gives
/// `pipeline`'s pieces stage by stage, on `rounds` random texts into which up to `extras_per_text
/// - 1` strings of `extra` are mixed.
pub(crate) fn assert_pass_matches_the_stages(
    pipeline: &crate::Pipeline,
    extra: &[&str],
    (seed, rounds, extras_per_text): (u64, usize, usize),
    by_hand: impl Fn(&str, &mut dyn FnMut(usize, usize)),
) {
    let mut nasty = Nasty::new(seed);
    for round in 0..rounds {
        let mut text = nasty.text(12);
        for _ in 0..round % extras_per_text {
            text.push_str(extra[nasty.below(extra.len())]);
            text.push_str(&nasty.text(3));
        }
        let mut by_pipeline = Vec::new();
        pipeline
            .stage_by_stage(&text, |start, end| by_pipeline.push((start, end)))
            .unwrap();
        let mut pieces = Vec::new();
        by_hand(&text, &mut |start, end| pieces.push((start, end)));
        assert_eq!(pieces, by_pipeline, "{text:?}");
    }
}

const SPECIAL_SETS: &[&[&str]] = &[
    &[],
    &["<|endoftext|>"],
    &["<|endoftext|>", "<|endoftext|><|endoftext|>"],
    &["<| sp |>", "<|endoftext|>"],
];

#[test]
fn split_safe_property_holds_for_the_known_patterns() {
    // A cut of the rule (see cut.rs) gives the same pieces.
    let mut nasty = Nasty::new(1);
    // (SuperBPE's pieces run across spaces: not split-safe, and its text is never cut)
    for pattern in KNOWN_PATTERNS
        .into_iter()
        .filter(|&p| p != crate::SUPERBPE_PATTERN)
    {
        let pretokenizer = Pretokenizer::new(pattern).unwrap();
        for _ in 0..1500 {
            let text = nasty.text(12);
            let whole = pretokenizer.pieces(&text);
            // Before a space, or after a newline (not before a slash), between non-whitespace.
            let spaces = text.match_indices(' ').map(|(at, _)| (at, at, at + 1));
            let newlines = text.match_indices('\n').map(|(at, _)| (at + 1, at, at + 1));
            for (cut, before_end, after_start) in spaces.chain(newlines) {
                let before = text[..before_end].chars().next_back();
                let after = text[after_start..].chars().next();
                if let (Some(b), Some(a)) = (before, after) {
                    let slash_after_newline = cut != before_end && a == '/';
                    if !is_regex_whitespace(a) && !is_regex_whitespace(b) && !slash_after_newline {
                        let mut parts = pretokenizer.pieces(&text[..cut]);
                        parts.extend(pretokenizer.pieces(&text[cut..]));
                        assert_eq!(parts, whole, "{pattern}: {text:?} cut at {cut}");
                    }
                }
            }
        }
    }
}

#[test]
fn last_safe_cut_is_safe_for_any_continuation() {
    let mut nasty = Nasty::new(2);
    let patterns = [
        GPT2_PATTERN,
        CL100K_PATTERN,
        O200K_PATTERN,
        LLAMA3_PATTERN,
        QWEN2_PATTERN,
        r"\w+|\s+|.",
    ];
    let mut cuts = 0;
    for pattern in patterns {
        let pretokenizer = Pretokenizer::new(pattern).unwrap();
        for tokens in SPECIAL_SETS {
            let specials = SpecialTokens::new(&strings(tokens));
            for _ in 0..400 {
                let text = nasty.text(16);
                let cut = last_safe_cut(&text, &pretokenizer, &specials);
                assert!(text.is_char_boundary(cut));
                if cut == 0 {
                    continue;
                }
                cuts += 1;
                for _ in 0..4 {
                    let whole = format!("{text}{}", nasty.text(4));
                    let context = format!("{pattern} {tokens:?}");
                    assert_cut_is_safe(&whole, cut, &pretokenizer, &specials, &context);
                }
            }
        }
    }
    assert!(cuts > 600, "too few cuts tested: {cuts}");
}

#[test]
fn next_safe_cut_is_safe() {
    let mut nasty = Nasty::new(3);
    let patterns = [
        GPT2_PATTERN,
        CL100K_PATTERN,
        O200K_PATTERN,
        LLAMA3_PATTERN,
        QWEN2_PATTERN,
        r"\w+|\s+|.",
    ];
    let mut cuts = 0;
    for pattern in patterns {
        let pretokenizer = Pretokenizer::new(pattern).unwrap();
        for tokens in SPECIAL_SETS {
            let specials = SpecialTokens::new(&strings(tokens));
            for _ in 0..400 {
                let text = nasty.text(16);
                let from = nasty.below(text.len() + 1);
                let Some(cut) = next_safe_cut(text.as_bytes(), from, &pretokenizer, &specials)
                else {
                    continue;
                };
                cuts += 1;
                assert!(
                    cut >= from && text.is_char_boundary(cut),
                    "{text:?} {from} {cut}"
                );
                // The window is the whole text here; continuations cannot matter either.
                let whole = format!("{text}{}", nasty.text(4));
                let context = format!("{pattern} {tokens:?}");
                assert_cut_is_safe(&whole, cut, &pretokenizer, &specials, &context);
            }
        }
    }
    assert!(cuts > 500, "too few cuts tested: {cuts}");
}

#[test]
fn shareable_across_threads() {
    fn assert_send_sync<T: Send + Sync + Clone>() {}
    assert_send_sync::<Pretokenizer>();
    assert_send_sync::<SpecialTokens>();
}

/// The scanners against fancy_regex on many generated texts and a sample of all code points.
/// (The Python tests check every assigned code point against `regex`; fancy_regex is too slow
/// for that in a debug build.)
#[test]
fn scanners_equal_the_regex() {
    let mut nasty = Nasty::new(4);
    for pattern in KNOWN_PATTERNS {
        let scanner = Pretokenizer::new(pattern).unwrap();
        let scalar = Pretokenizer::with_scalar_scanner(pattern).unwrap();
        let regex = Pretokenizer::with_regex_engine(pattern).unwrap();
        assert!(scanner.uses_scanner() && scalar.uses_scanner() && !regex.uses_scanner());
        for _ in 0..10_000 {
            let text = nasty.text(10);
            let expected = regex.pieces(&text);
            assert_eq!(scanner.pieces(&text), expected, "{pattern}: {text:?}");
            assert_eq!(scalar.pieces(&text), expected, "{pattern}: {text:?}");
        }
        // One code point in 50 (a different sample for each pattern), each followed by an atom.
        let mut text = String::new();
        let offset = nasty.below(50) as u32;
        for c in (offset..0x110000u32).step_by(50).filter_map(char::from_u32) {
            text.push(c);
            text.push_str(ATOMS[nasty.below(ATOMS.len())]);
        }
        let expected = regex.pieces(&text);
        assert_eq!(scanner.pieces(&text), expected, "{pattern}");
        assert_eq!(scalar.pieces(&text), expected, "{pattern}");
    }
}

#[test]
fn capture_groups_are_refused() {
    // With groups, tools disagree on the pieces (`regex.findall` keeps only the groups), so the
    // pattern is refused, naming the count; non-capturing groups and look-around are fine.
    for (pattern, groups) in [(r"(\w+)|\s+", 1), (r"(a)(b)|.", 2), (r"(?P<word>\w+)|.", 1)] {
        let error = Pretokenizer::new(pattern).unwrap_err();
        assert_eq!(
            error,
            PretokenizeError::CaptureGroups {
                pattern: pattern.to_string(),
                groups
            }
        );
        assert!(error.to_string().contains("(?:...)"), "{error}");
    }
    for pattern in [
        r"(?:\w+)|\s+|.",
        r"(?i:ab)|(?s:.)",
        r"\s+(?!\S)|\s+|\S+",
        r"[(]\w+[)]|[\s\S]",
    ] {
        assert!(Pretokenizer::new(pattern).is_ok(), "{pattern}");
    }
}

#[test]
fn catastrophic_backtracking_is_refused_at_construction() {
    // Look-around forces the backtracking engine; nested alternatives make it exponential.
    for pattern in [
        r"(?:a|a)+(?=$)|.",
        r"(?:\w|\w)+(?!\S)|.",
        r"(?:x+x+)+(?=y)|\s|.",
    ] {
        match Pretokenizer::new(pattern) {
            Err(PretokenizeError::MatchFailed {
                pattern: p,
                failure: MatchFailure::Backtracking,
                ..
            }) => assert_eq!(p, pattern),
            other => panic!("{pattern}: {other:?}"),
        }
    }
    // Without look-around, fancy_regex hands the pattern to a linear-time engine: no limit hit,
    // and the pieces are those of the whole matches.
    let pretokenizer = Pretokenizer::new(r"(?:a|a)+$|\s+|.").unwrap();
    let text = format!("{}b", "a".repeat(40));
    assert_eq!(pretokenizer.pieces(&text).len(), 41);
    // Polynomial look-around patterns (the common `\s+(?!\S)`) pass the probes.
    assert!(Pretokenizer::new(r"\s+(?!\S)|\s+|\w+|.").is_ok());
    assert!(Pretokenizer::new(r"(?:\w+\s?)+(?=\.)|.").is_err());
    assert!(Pretokenizer::new(r"(?:a|aa)+(?=b)|.").is_err());
}

#[test]
fn backtracking_limit_while_splitting_is_an_error() {
    // A pattern exponential only on text the probes do not try: two alternating characters.
    let pattern = r"(?:ab|a(?=b)b)+(?=$)|(?s:.)";
    assert!(Pretokenizer::new(pattern).is_ok());
    let pretokenizer = Pretokenizer::with_backtrack_limit(pattern, 100_000).unwrap();
    let text = format!("{}c", "ab".repeat(30));
    let error = pretokenizer.try_for_each_piece(&text, |_| {}).unwrap_err();
    assert!(
        matches!(
            error,
            PretokenizeError::MatchFailed {
                pattern: ref p,
                failure: MatchFailure::Backtracking,
                offset: Some(0),
                ..
            } if p == pattern
        ),
        "{error}"
    );
    assert!(error.to_string().contains("backtracks catastrophically"));
    // Short texts still split.
    assert_eq!(pretokenizer.pieces("abab").len(), 1);
}

/// The character that `error` (a failure to cover a text) names, and its offset.
fn uncovered(error: &PretokenizeError) -> (char, Option<usize>) {
    match error {
        PretokenizeError::MatchFailed {
            failure: MatchFailure::Uncovered(c),
            offset,
            ..
        } => (*c, *offset),
        other => panic!("not an uncovered character: {other:?}"),
    }
}

#[test]
fn patterns_whose_matches_do_not_tile_the_text_are_refused_at_construction() {
    // Each leaves some character of a probe to no match: encoding would drop it. Named: the
    // character the error names (the first gap of the first probe with one).
    for (pattern, missed) in [
        ("", 'H'),
        ("(?=a)", 'H'),
        (r"\w+", ','),
        (r"[a-z]+|\s+", 'H'),
        (r"\S+", ' '),
        (r".+", '\n'),
        // an alternative that matches the empty string wins over the catch-all after it
        (r"a*|(?s:.)", 'H'),
        (r"\p{L}+|\p{N}+|\s+|\p{P}+", '+'),
        // emoji sequences: the zero-width joiner is a format character
        (r"[\p{L}\p{N}\p{P}\p{S}\s]+|\p{M}", '\u{200d}'),
        // a base character with its combining marks: not a mark at the start of a text
        (r"\P{M}\p{M}*", '\u{301}'),
        (r"[^\r]|\r(?=\n)", '\r'),
        (r"\s+(?!\S)|\S+", ' '),
        // characters the pattern names (literally or by an escape) are probed too
        ("[^\u{2801}]+|\u{2802}", '\u{2801}'),
        (r"[^\x{2801}]+", '\u{2801}'),
        (r"[^\u2801]+", '\u{2801}'),
        (r"[^\u{2801}-\u{28ff}]+", '\u{2801}'),
    ] {
        let error = match Pretokenizer::new(pattern) {
            Err(error) => error,
            Ok(_) => panic!("{pattern:?} accepted"),
        };
        assert_eq!(uncovered(&error), (missed, None), "{pattern:?}: {error}");
        let message = error.to_string();
        assert!(
            message.starts_with(&format!(
                "pre-tokenizer pattern {pattern:?} does not cover all of the text (no match \
                 covers {missed:?} (U+{:04X}) in \"",
                u32::from(missed)
            )),
            "{message}"
        );
        assert!(!message.contains('\n'), "{message}");
    }
    // The same with a last alternative that takes any character left.
    for pattern in [
        r"\w+|(?s:.)",
        r"[a-z]+|\s+|[\s\S]",
        r"\S+|\s+",
        r".+|\n",
        r"\p{L}+|\p{N}+|\s+|\p{P}+|(?s:.)",
        r"\P{M}\p{M}*|(?s:.)",
        r"\s+(?!\S)|\s+|\S+",
        r"[^\x{2801}]+|\x{2801}",
    ] {
        assert!(Pretokenizer::new(pattern).is_ok(), "{pattern:?}");
    }
}

#[test]
fn a_gap_while_splitting_is_an_error_at_its_offset() {
    // The probes hold no Braille pattern, and the pattern names none: accepted at construction,
    // it fails on a text with one (at encode time, not silently).
    let pattern = r"[^\s\p{Braille}]+|\s";
    let pretokenizer = Pretokenizer::new(pattern).unwrap();
    assert_eq!(pretokenizer.pieces("ab c"), ["ab", " ", "c"]);
    assert_eq!(pretokenizer.pieces(""), Vec::<&str>::new());
    for (text, at) in [
        ("ab \u{2801}c", 3),
        ("\u{2801}", 0),
        ("\u{2801}ab", 0),
        ("ab\u{2801}", 2),
        ("é \u{2801}\u{2802}", 3),
    ] {
        let mut before = Vec::new();
        let error = pretokenizer
            .try_for_each_piece(text, |piece| before.push(piece))
            .unwrap_err();
        assert_eq!(uncovered(&error), ('\u{2801}', Some(at)), "{text:?}");
        assert_eq!(before.concat(), &text[..at], "the pieces before the gap");
        assert_eq!(
            error.to_string(),
            format!(
                "pre-tokenizer pattern {pattern:?} does not cover all of the text (no match \
                 covers '\u{2801}' (U+2801) at byte {at} of a text of {} bytes); its matches \
                 must cover every character of any text, or encoding would drop the rest (a last \
                 alternative |(?s:.) takes any character the others leave)",
                text.len()
            )
        );
    }
    // A zero-width match in the gap changes nothing: the gap is still the first byte uncovered.
    let pretokenizer = Pretokenizer::new(r"[^\p{Braille}]+|(?=\p{Braille})").unwrap();
    let error = pretokenizer
        .try_for_each_piece("ab\u{2801}", |_| {})
        .unwrap_err();
    assert_eq!(uncovered(&error), ('\u{2801}', Some(2)));
}

#[test]
fn the_known_patterns_tile_on_the_regex_engine_too() {
    // The scanners do not check (they tile by construction); the regex engine runs the check
    // on the same patterns, over every character with several neighbours.
    let mut text = String::new();
    for c in (0..0x110000u32).step_by(7).filter_map(char::from_u32) {
        text.push(c);
        text.push_str(["a", " ", "\n", "1", "'s", "\r\n", "  "][c as usize % 7]);
    }
    for pattern in KNOWN_PATTERNS {
        let regex = Pretokenizer::with_regex_engine(pattern).unwrap();
        assert_eq!(regex.pieces(&text).concat(), text, "{pattern}");
    }
}

#[test]
fn a_pattern_too_big_to_compile_is_refused_at_once() {
    for pattern in [
        r"a{99999999}|(?s:.)",
        r"\p{L}{100000}|(?s:.)",
        r"(?=x)a{99999999}",
    ] {
        // A hang guard, not a speed threshold (a second or less in a release build): compiling
        // such a pattern whole once took minutes; 60 s without an answer fails the test.
        let (sender, receiver) = std::sync::mpsc::channel();
        std::thread::spawn(move || sender.send(Pretokenizer::new(pattern).map(|_| ())));
        let error = receiver
            .recv_timeout(std::time::Duration::from_secs(60))
            .unwrap_or_else(|_| panic!("{pattern}: no answer within 60 s"))
            .unwrap_err();
        assert_eq!(
            error,
            PretokenizeError::TooBig {
                pattern: pattern.to_string(),
                limit: SIZE_LIMIT
            }
        );
        assert_eq!(
            error.to_string(),
            format!(
                "pre-tokenizer pattern {pattern:?} is too big to compile (over 10 MB); use \
                 smaller bounded repetitions"
            )
        );
    }
    assert!(Pretokenizer::new(r"a{1000}|(?s:.)").is_ok());
}

#[test]
fn named_characters_include_escapes() {
    let pattern = r"a\x41\x{263a}\u2603\u{1F600}\U0001F601\x{}\xZZ\u{110000}";
    assert_eq!(
        named_characters(pattern),
        [
            vec!['A', '\u{263a}', '\u{2603}', '\u{1F600}', '\u{1F601}'],
            pattern.chars().collect(),
        ]
        .concat()
    );
}

/// The scanners with and without their 64-byte fast path against fancy_regex, on texts long
/// enough to cross many windows: runs of ASCII letters (lower, upper, mixed), digits of every run
/// length, whitespace runs with and without newlines before words and punctuation, contractions
/// of every case, punctuation followed by newlines and slashes, and a character that is not
/// ASCII at every offset of a window.
#[test]
fn fast_path_equals_the_scalar_scanner_and_the_regex() {
    const PIECES: &[&str] = &[
        "a",
        "b",
        "z",
        "A",
        "Z",
        "the",
        "The",
        "THE",
        "camelCase",
        "HTMLParser",
        "word",
        "x",
        " ",
        "  ",
        "   ",
        "\t",
        "\n",
        "\n\n",
        "\r\n",
        " \n",
        "\n ",
        " \n ",
        "\n  \n",
        "\t\n\t",
        "\x0b",
        "\x0c",
        "'",
        "'s",
        "'S",
        "'t",
        "'ll",
        "'LL",
        "'ve",
        "'re",
        "'d",
        "'m",
        "'x",
        "''",
        ".",
        ",",
        "!",
        "?",
        "-",
        "(",
        ")",
        "/",
        "//",
        "\n/",
        "$",
        "0",
        "1",
        "12",
        "123",
        "1234",
        "12345",
        "1234567",
        "é",
        "\u{a0}",
        "\u{3000}",
        "\u{85}",
        "中",
        "ſ",
        "\u{301}",
        "ǅ",
        "😀",
        " '",
        " ''s",
        ".\n",
        ".\n\n",
        "\x1c",
    ];
    let mut nasty = Nasty::new(5);
    for pattern in KNOWN_PATTERNS {
        let check = both_scanners_check(pattern);
        for round in 0..600 {
            // Mostly ASCII, so that long stretches are the fast path's.
            let mut text = String::new();
            let atoms = 10 + nasty.below(120);
            let ascii_only = round % 3 == 0;
            for _ in 0..atoms {
                let piece = PIECES[nasty.below(PIECES.len())];
                if ascii_only && !piece.is_ascii() {
                    continue;
                }
                text.push_str(piece);
            }
            check(&text);
        }
        // Long runs of one class, then anything, crossing the 64-byte windows at every length.
        for run in ["a", "A", "aB", "1", " ", "\n", " \n", ".", "ab "] {
            for length in 55..140usize {
                let text = run.repeat(length.div_ceil(run.len()));
                for end in [
                    "",
                    "x",
                    " x",
                    "'s",
                    "'S",
                    "é",
                    "\u{3000}x",
                    "\n ",
                    "1",
                    "./",
                ] {
                    check(&format!("{text}{end}"));
                }
            }
        }
        // A character that is not ASCII (or an apostrophe) at every offset of two windows.
        let base = "The cat's  ratios: 12345 of 678, HTML/XML parsing\n\n  in 1999 \n\t (it's) ";
        let base = base.repeat(3);
        for insert in [
            "é", "\u{a0}", "\u{3000}", "\u{85}", "中", "'s", "'", "\u{301}", "ſ",
        ] {
            for at in (0..=base.len()).filter(|&at| base.is_char_boundary(at)) {
                let mut text = base.clone();
                text.insert_str(at, insert);
                check(&text);
            }
        }
        // Long stretches of other scripts (where the fast path backs off) between English.
        let english = "The cat's 12345 ratios, HTML/XML\n\n  it's ";
        for other in ["слово, ", "中文。", "e\u{301} ", "é"] {
            for repeats in [1, 30, 300, 3000] {
                let text = format!(
                    "{}{}{}",
                    english.repeat(20),
                    other.repeat(repeats),
                    english.repeat(20)
                );
                check(&text);
            }
        }
        // Digit runs of every length after every kind of character.
        for length in 1..80 {
            for before in ["", "a", " ", "\n", ".", "A"] {
                check(&format!("{before}{} x", "7".repeat(length)));
            }
        }
    }
}

/// The SSE2 and AVX2 classifiers agree with the byte-at-a-time one, for every byte value at
/// every bit and on random windows (the differential tests above run on the one the CPU has).
#[test]
fn classify_agrees_with_bytewise() {
    let check = |window: &[u8; 64]| {
        let expected = crate::block::classify_bytewise(window);
        assert_eq!(crate::block::classify(window), expected, "{window:?}");
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2 (just detected).
            let avx2 = unsafe { crate::block::classify_avx2(window) };
            assert_eq!(avx2, expected, "{window:?}");
        }
    };
    for byte in 0..=255u8 {
        for at in 0..64 {
            let mut window = [b'a'; 64];
            window[at] = byte;
            check(&window);
        }
    }
    let mut nasty = Nasty::new(6);
    for _ in 0..1000 {
        check(&std::array::from_fn(|_| nasty.below(256) as u8));
    }
}

/// Characters of every class the scanners tell apart, from many scripts and of every UTF-8
/// length: letters of each case class (Lu, Ll, Lt, Lm, Lo), marks, numbers that are not ASCII
/// digits, whitespace that is not ASCII, symbols, format characters, and ASCII among them.
const MIXED: &[char] = &[
    'a',
    'z',
    'A',
    'Z',
    '0',
    '7',
    ' ',
    '\t',
    '\n',
    '\r',
    '\x0b',
    '\'',
    '/',
    '.',
    '!',
    '\x1c',
    'é',
    'É',
    'ß',
    'ſ',
    'ǅ',
    'ǈ',
    'ʰ',
    'ʕ',
    'ʼ',
    'ω',
    'Ω',
    'я',
    'Я',
    'ա',
    'Ա',
    'ა',
    'Ⴀ',
    'ᏸ',
    'א',
    'ب',
    'ह',
    'ก',
    '中',
    'ア',
    'ー',
    '가',
    'ᄀ',
    'ꀀ',
    'ᵃ',
    'ⓐ',
    'Ⓐ',
    'ⅰ',
    'Ⅰ',
    '𝐀',
    '𝐚',
    '𐐀',
    '𐐨',
    '𠀀',
    '𞤀',
    '𞤢',
    '\u{301}',
    '\u{308}',
    '\u{903}',
    '\u{93f}',
    '\u{94d}',
    '\u{e31}',
    '\u{20dd}',
    '\u{fe0f}',
    '\u{1f3fd}',
    '\u{e0041}',
    '٣',
    '৩',
    '१',
    '²',
    '½',
    '①',
    '１',
    '𝟙',
    '𐒠',
    '\u{85}',
    '\u{a0}',
    '\u{1680}',
    '\u{2000}',
    '\u{200a}',
    '\u{2028}',
    '\u{2029}',
    '\u{202f}',
    '\u{205f}',
    '\u{3000}',
    '\u{200b}',
    '\u{200d}',
    '\u{feff}',
    '\u{ad}',
    '—',
    '“',
    '«',
    '€',
    '©',
    '∑',
    '😀',
    '👍',
    '🇩',
    '\u{e000}',
    '\u{f0000}',
    '\u{10fffd}',
    '\u{378}',
    '\u{fffd}',
    '¿',
    '¡',
    '’',
];

/// A check that both scanners of `pattern` (the fast path and the piece-at-a-time one) cut a
/// text as the regex engine does.
fn both_scanners_check(pattern: &str) -> impl Fn(&str) + '_ {
    let fast = Pretokenizer::new(pattern).unwrap();
    let scalar = Pretokenizer::with_scalar_scanner(pattern).unwrap();
    let regex = Pretokenizer::with_regex_engine(pattern).unwrap();
    move |text: &str| {
        let expected = regex.pieces(text);
        assert_eq!(fast.pieces(text), expected, "fast {pattern}: {text:?}");
        assert_eq!(scalar.pieces(text), expected, "scalar {pattern}: {text:?}");
    }
}

/// The fast path (masks of whole windows, characters that are not ASCII classified into them)
/// against the scalar scanner and the regex, on random strings of mixed scripts at every length
/// up to two windows and more, and behind every number of ASCII bytes (every alignment of the
/// characters against the window).
#[test]
fn fast_path_equals_the_regex_on_mixed_scripts() {
    let mut nasty = Nasty::new(7);
    for pattern in KNOWN_PATTERNS {
        let check = both_scanners_check(pattern);
        for length in 0..150 {
            for _ in 0..12 {
                // A few classes at a time, so that runs of one class (words, numbers, spaces)
                // form, as well as every pair of neighbours.
                let pool: Vec<char> = (0..1 + nasty.below(6))
                    .map(|_| MIXED[nasty.below(MIXED.len())])
                    .collect();
                let text: String = (0..length).map(|_| pool[nasty.below(pool.len())]).collect();
                check(&text);
                let lead = ["a", " ", "A", "1", ".", "\n"][nasty.below(6)].repeat(nasty.below(70));
                check(&format!("{lead}{text}"));
            }
        }
        // One string at every alignment: prefixes of ASCII of every length up to a window.
        let text: String = (0..300).map(|_| MIXED[nasty.below(MIXED.len())]).collect();
        for shift in 0..70 {
            check(&format!("{}{text}", "x".repeat(shift)));
            check(&format!("{}{text}", " ".repeat(shift)));
        }
    }
}

/// `add_unicode` gives every byte of each whole character of a window the classes the table
/// has for it, and leaves unknown exactly the character cut by the window's end and padding.
#[test]
fn unicode_masks_are_the_tables_classes() {
    use crate::block::{add_unicode, classify, Classes};
    use crate::classes::{table, LETTER, LOWER, NUMBER, SPACE, UPPER};
    let mut nasty = Nasty::new(8);
    for round in 0..3000 {
        let text: String = (0..40).map(|_| MIXED[nasty.below(MIXED.len())]).collect();
        let mut start = nasty.below(text.len());
        while !text.is_char_boundary(start) {
            start -= 1;
        }
        let tail = &text.as_bytes()[start..];
        let mut window = [0x80u8; 64];
        let len = tail.len().min(64);
        window[..len].copy_from_slice(&tail[..len]);
        let mut classes = classify(&window);
        add_unicode(&mut classes, &window, table());
        let mut expected = Classes {
            non_ascii: classes.non_ascii,
            cont: classes.cont,
            newline: classes.newline,
            blank: classes.blank,
            apostrophe: classes.apostrophe,
            slash: classes.slash,
            ..Classes::default()
        };
        for (at, c) in text[start..].char_indices().take_while(|&(at, _)| at < 64) {
            let bits = ((1u64 << c.len_utf8()) - 1) << at;
            if at + c.len_utf8() > 64 {
                // cut by the window's end (the rest is not in the window)
                expected.unknown |= u64::MAX << at;
                break;
            }
            let classes = table().get(c as u32);
            let has = |class: u8| classes & class != 0;
            let set = |mask: &mut u64, yes: bool| *mask |= if yes { bits } else { 0 };
            set(&mut expected.letter, has(LETTER));
            set(&mut expected.digit, has(NUMBER));
            set(&mut expected.space, has(SPACE));
            set(
                &mut expected.upper,
                has(LETTER) && has(UPPER) && !has(LOWER),
            );
            set(
                &mut expected.lower,
                has(LETTER) && has(LOWER) && !has(UPPER),
            );
            set(&mut expected.both, has(LETTER) && has(UPPER) && has(LOWER));
            set(
                &mut expected.mark,
                !has(LETTER) && (has(UPPER) || has(LOWER)),
            );
        }
        if len < 64 {
            expected.unknown |= u64::MAX << len; // padding
        }
        assert_eq!(classes, expected, "round {round}: {:?}", &text[start..]);
    }
}

/// Runs of letters (and marks, numbers, spaces) of the scripts of running text whose characters
/// take two or three UTF-8 bytes (the flat table's): Latin-1 Supplement, Latin Extended, Greek,
/// Cyrillic, Hebrew, Arabic, Devanagari, Thai, kana, CJK, Hangul, Vietnamese, mixed with the other
/// kinds of character at random positions, behind ASCII prefixes of lengths around a window's
/// (so that runs cross the 64-byte windows at many alignments); both scanners against the regex.
#[test]
fn scripts_runs_equal_the_regex_at_every_alignment() {
    // (first, last) code points of each script's block
    const SCRIPTS: &[(u32, u32)] = &[
        (0x00A0, 0x00FF), // Latin-1 Supplement (with its signs, a no-break space, numbers)
        (0x0100, 0x024F), // Latin Extended-A and -B (both cases, title case)
        (0x0370, 0x03FF), // Greek and Coptic
        (0x0400, 0x04FF), // Cyrillic
        (0x0590, 0x05FF), // Hebrew (points are marks)
        (0x0600, 0x06FF), // Arabic (marks, digits, Lm)
        (0x0900, 0x097F), // Devanagari (marks, digits)
        (0x0E00, 0x0E7F), // Thai
        (0x3040, 0x30FF), // Hiragana, Katakana (Lm, marks)
        (0x4E00, 0x9FFF), // CJK Unified Ideographs
        (0xAC00, 0xD7A3), // Hangul syllables
        (0x1E00, 0x1EFF), // Latin Extended Additional (Vietnamese)
    ];
    let mut nasty = Nasty::new(11);
    for pattern in KNOWN_PATTERNS {
        let check = both_scanners_check(pattern);
        for &(first, last) in SCRIPTS {
            let script = |nasty: &mut Nasty| loop {
                let code = first + nasty.below((last - first + 1) as usize) as u32;
                if let Some(c) = char::from_u32(code) {
                    return c;
                }
            };
            for round in 0..40 {
                // Runs of one script with, now and then, any other kind of character
                let text: String = (0..120)
                    .map(|_| {
                        if round % 4 == 0 || nasty.below(6) != 0 {
                            script(&mut nasty)
                        } else {
                            MIXED[nasty.below(MIXED.len())]
                        }
                    })
                    .collect();
                for shift in [0, 1, 2, 3, nasty.below(64), 61, 62, 63] {
                    check(&format!("{}{text}", "x".repeat(shift)));
                    check(&format!("{}{text}", " ".repeat(shift)));
                }
                // another kind of character at a random position of a run
                let run: String = (0..70).map(|_| script(&mut nasty)).collect();
                let at = run.char_indices().nth(nasty.below(70)).unwrap().0;
                let odd = MIXED[nasty.below(MIXED.len())];
                check(&format!("{}{odd}{}", &run[..at], &run[at..]));
            }
        }
    }
}

/// `Pretokenizer::split_by_shortcut` (the shortcuts that skip the scanner for a word and its
/// space, with or without punctuation and a newline after it) against the regex engine, on short
/// words of letters from every case class o200k tells apart (`Lu`, `Lt`, `Ll`, `Lm`, `Lo`, in
/// ASCII and beyond), marks and digits among them at times, then at times ASCII punctuation (the
/// apostrophe among it, which may start a contraction), `/`, a newline or `\r\n`: wherever a
/// shortcut gives pieces, they are the regex's; and the pieces through the scanner are the
/// regex's either way. Both shortcuts must be taken often.
#[test]
fn the_pieces_a_shortcut_gives_are_the_regexs() {
    const LETTERS: [&str; 14] = [
        "a", "Z", "é", "Ж", "ж", "ǅ", "ʰ", "ª", "中", "ا", "ß", "Σ", "ς", "ᾈ",
    ];
    const OTHERS: [&str; 5] = ["\u{301}", "5", "'", "_", "\u{903}"];
    const AFTER: [&str; 12] = [
        ".", ",", ")", "\"", "'", "/", "-", "...", ":", "!?", ";", "»",
    ];
    const ENDS: [&str; 5] = ["", "", "\n", "\r\n", "\n\n"];
    let mut nasty = Nasty::new(42);
    for pattern in KNOWN_PATTERNS {
        let scanner = Pretokenizer::new(pattern).unwrap();
        let regex = Pretokenizer::with_regex_engine(pattern).unwrap();
        let (mut one_piece, mut with_punctuation) = (0, 0);
        for _ in 0..30_000 {
            let mut word = String::from(if nasty.below(2) == 0 { " " } else { "" });
            for _ in 0..nasty.below(7) {
                let pool: &[&str] = if nasty.below(12) == 0 {
                    &OTHERS
                } else {
                    &LETTERS
                };
                word.push_str(pool[nasty.below(pool.len())]);
            }
            if nasty.below(2) == 0 {
                for _ in 0..1 + nasty.below(3) {
                    word.push_str(AFTER[nasty.below(AFTER.len())]);
                }
                word.push_str(ENDS[nasty.below(ENDS.len())]);
            }
            if word.is_empty() {
                continue;
            }
            let expected = regex.pieces(&word);
            let mut pieces = Vec::new();
            if scanner.split_by_shortcut(&word, &mut |piece| pieces.push(piece)) {
                assert_eq!(pieces, expected, "{pattern}: {word:?}");
                if pieces.len() == 1 {
                    one_piece += 1;
                } else {
                    with_punctuation += 1;
                }
            } else {
                assert!(pieces.is_empty(), "{pattern}: {word:?}");
            }
            assert_eq!(scanner.pieces(&word), expected, "{pattern}: {word:?}");
        }
        assert!(
            pattern == SUPERBPE_PATTERN || (one_piece > 1000 && with_punctuation > 1000),
            "{pattern}: {one_piece} {with_punctuation}"
        );
    }
}

#[test]
fn a_pattern_without_a_scanner_gives_the_regex_engines_pieces_on_the_automaton() {
    // (DeepSeek-V3's word regex with its numbers; one with a look-behind)
    let patterns = [
        r"[!\x22#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\p{N}{1,3}|\S|\s*[\r\n]+|\s+(?!\S)|\s+",
        r"\b\w+|\W|\s+(?!\S)|\s+",
    ];
    let mut nasty = Nasty::new(23);
    for pattern in patterns {
        let automaton = Pretokenizer::new(pattern).unwrap();
        assert!(automaton.inner.automaton.is_some(), "{pattern}");
        let engine = Pretokenizer::with_regex_engine(pattern).unwrap();
        for _ in 0..800 {
            let text = nasty.text(16);
            assert_eq!(
                automaton.pieces(&text),
                engine.pieces(&text),
                "{pattern} on {text:?}"
            );
        }
    }
    // A pattern whose matches leave a gap (the pre-tokenizer refuses such a pattern when it is
    // made, by the text it probes it with): the gap is named where the regex engine names it.
    let pattern = r" ?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}!]+|\s+";
    let automaton = split_regex::SplitRegex::of(pattern).unwrap();
    let regex = fancy_regex::Regex::new(pattern).unwrap();
    for _ in 0..800 {
        let text = nasty.text(16) + "a!b";
        let (mut by_automaton, mut by_engine) = (Vec::new(), Vec::new());
        let failed = tile_automaton(&automaton, &text, |piece| by_automaton.push(piece));
        assert_eq!(
            failed,
            tile(&regex, &text, |piece| by_engine.push(piece)),
            "{text:?}"
        );
        assert_eq!(by_automaton, by_engine, "{text:?}");
    }
}

/// A sink that takes a window's pieces in a loop of its own, as the encoder's does, and counts
/// how many came that way.
#[derive(Default)]
struct Runs {
    spans: Vec<(usize, usize)>,
    by_window: usize,
}

impl Spans for &mut Runs {
    fn span(&mut self, start: usize, end: usize) {
        self.spans.push((start, end));
    }

    fn run(&mut self, start: usize, base: usize, mut ends: u64) -> usize {
        let mut i = start;
        while ends != 0 {
            let end = base + ends.trailing_zeros() as usize;
            self.spans.push((i, end));
            self.by_window += 1;
            i = end;
            ends &= ends - 1;
        }
        i
    }
}

/// The spans a sink gets, a window's at once or one by one, are the pieces, in any text (and
/// most come by the window, where the pattern has a way to find them so).
#[test]
fn a_sink_taking_windows_whole_gets_the_same_spans() {
    let mut nasty = Nasty::new(5);
    let english =
        "The quick brown fox jumps over the lazy dog, doesn't it? 1234 times.\n".repeat(20);
    for pattern in KNOWN_PATTERNS {
        let scanner = Pretokenizer::new(pattern).unwrap();
        let mut by_window = 0;
        for round in 0..2_000 {
            let text = if round == 0 {
                english.clone()
            } else {
                nasty.text(40)
            };
            let mut closure = Vec::new();
            scanner
                .try_for_each_span(&text, |start, end| closure.push((start, end)))
                .unwrap();
            let expected: Vec<(usize, usize)> = scanner
                .pieces(&text)
                .iter()
                .map(|piece| {
                    let start = piece.as_ptr() as usize - text.as_ptr() as usize;
                    (start, start + piece.len())
                })
                .collect();
            let mut runs = Runs::default();
            scanner.try_spans_into(&text, &mut runs).unwrap();
            assert_eq!(closure, expected, "{pattern}: {text:?}");
            assert_eq!(runs.spans, expected, "{pattern}: {text:?}");
            by_window += runs.by_window;
        }
        // (SuperBPE's second stage has no window of its own: every piece comes by itself)
        if pattern != crate::SUPERBPE_PATTERN {
            assert!(
                by_window > 1000,
                "{pattern}: {by_window} pieces came by window"
            );
        }
    }
}
