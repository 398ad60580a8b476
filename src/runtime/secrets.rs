//! Secrets a skill's tree may not carry, read by their form under any file name: the
//! ledger is append-only, so a secret `sources scan` recorded could never be taken back
//! (outside reviews 91, 132–134, 136, 139). Read on the safe side — a document quoting a
//! real-looking secret is refused too — and by heuristics: a secret in no form below is
//! not read (docs/profiles.md lists the forms and the known limits).
//!
//! The forms: an ASCII-armored private key with its body; key material by its shape (a
//! PuTTY key's private lines, a private JWK, a DER private key in base64); a provider
//! token by its prefix and length; a value assigned to a key that names a secret
//! (`DB_PASSWORD=…`, `"apiKey": "…"`, `password: |` and the value on the next line,
//! `<password>…</password>`, `ENV TOKEN …`); a URL's password; an `Authorization: Basic`
//! or `Bearer` header; a signed JWT or a JWE; and any of these encoded in base64 (a run of
//! base64 pieces, wrapped, indented or quoted, is decoded and read again, twice at most).

/// What secret `bytes` hold, if any: its form and the line it is on (1-based), for the
/// refusal.
pub fn secret_in(bytes: &[u8]) -> Option<String> {
    find(&String::from_utf8_lossy(bytes), 0).or_else(|| {
        // UTF-16 text — a PDF's strings, a file PowerShell wrote — read as its ASCII, the
        // zero bytes dropped (outside review 167 F1: a token in it was not read).
        bytes.contains(&0).then_some(()).and_then(|()| {
            let narrow: Vec<u8> = bytes.iter().copied().filter(|b| *b != 0).collect();
            find(&String::from_utf8_lossy(&narrow), 0).map(|what| format!("{what}, in UTF-16"))
        })
    })
}

/// At most `len` bytes of `text` from `from` (less, to end on a character boundary).
/// Every look after a match is bounded by one (outside review 167 F2: each match read to
/// the end of the file, so a file of repeated matches took time quadratic in its size —
/// minutes for a few hundred kilobytes, under the ledger's writer lock).
fn window(text: &str, from: usize, len: usize) -> &str {
    let rest = text.get(from..).unwrap_or_default();
    let mut end = len.min(rest.len());
    while !rest.is_char_boundary(end) {
        end -= 1;
    }
    rest.get(..end).unwrap_or_default()
}

/// How far after a match a value is read: a secret, a key's value or the block holding it
/// is shorter (an armored key's body, which can be longer, is read by [`armored`] in one pass).
const LOOK: usize = 512;

/// How far a provider token is read (PyPI's, the longest here, is about 220 characters).
const TOKEN_LOOK: usize = 256;

fn find(text: &str, depth: u8) -> Option<String> {
    let line = |at: usize| text.get(..at).map_or(0, |t| t.matches('\n').count()) + 1;
    // JSON inside a JSON string (`"{\"password\":\"…\"}"`, as AWS Secrets Manager holds it):
    // read unescaped too (outside review 141 F4).
    if depth < 2 && text.contains("\\\"") {
        let unescaped = text.replace("\\\"", "\"").replace("\\\\", "\\");
        if let Some(inner) = find(&unescaped, depth + 1) {
            return Some(inner);
        }
    }
    let found = armored(text)
        .map(|at| (at, "an armored private key".to_owned()))
        .or_else(|| key_material(text))
        .or_else(|| token(text))
        // A SealedSecret's `encryptedData` is ciphertext, made to be committed.
        .or_else(|| if text.contains("encryptedData:") { None } else { assigned(text) })
        .or_else(|| url_password(text).map(|at| (at, "a password in a URL".to_owned())))
        .or_else(|| header(text))
        .or_else(|| jwt(text))
        .or_else(|| mnemonic(text).map(|at| (at, "a wallet's recovery phrase".to_owned())))
        .or_else(|| {
            byte_array_key(text)
                .map(|at| (at, "a 64-byte key pair as an array (a Solana keypair's form)".to_owned()))
        });
    if let Some((at, what)) = found {
        return Some(format!("{what} (line {})", line(at)));
    }
    if depth < 2 {
        for (at, run) in base64_runs(text) {
            let decoded = base64_decode(&run);
            if der_private_key(&decoded) {
                return Some(format!("a DER private key in base64 (line {})", line(at)));
            }
            if let Some(inner) = find(&String::from_utf8_lossy(&decoded), depth + 1) {
                return Some(format!("{inner} encoded in base64 (line {})", line(at)));
            }
        }
    }
    None
}

/// An armored key with its body: `-----BEGIN …PRIVATE KEY…-----`, at least 64 base64
/// characters, then `-----END` (a header quoted in a document, or built in a script, is
/// not a key: outside review 134).
fn armored(text: &str) -> Option<usize> {
    // Where each `-----END` is, found once: a block's END is the first after its BEGIN (each
    // BEGIN searching on to the end was quadratic: outside review 167 F2).
    let ends: Vec<usize> = text.match_indices("-----END").map(|(at, _)| at).collect();
    let begins: Vec<usize> = text.match_indices("-----BEGIN").map(|(at, _)| at).collect();
    let next = |list: &[usize], after: usize| list.get(list.partition_point(|&p| p < after)).copied();
    begins.iter().copied().filter(|&at| text.get(at..).is_some_and(|t| t.starts_with("-----BEGIN "))).find(
        |&at| {
            let rest = window(text, at + 11, 128);
            let Some(label_end) = rest.find("-----") else { return false };
            let label = rest.get(..label_end).unwrap_or_default();
            let body_at = at + 11 + label_end + 5;
            let Some(end_at) = next(&ends, body_at) else { return false };
            // The body of this block only, closed by a private key's END (outside review 141: a
            // header named in prose paired with a later public key's body).
            if next(&begins, body_at).is_some_and(|b| b < end_at) {
                return false;
            }
            let body = text.get(body_at..).unwrap_or_default();
            let end = end_at - body_at;
            let closing = window(body, end, 128).lines().next().unwrap_or_default();
            if !closing.contains("PRIVATE KEY") {
                return false;
            }
            let base64 = body
                .get(..end)
                .unwrap_or_default()
                .chars()
                .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '/' | '='))
                .count();
            label.contains("PRIVATE KEY") && label.len() < 64 && base64 >= 64
        },
    )
}

/// Key material by its shape: a PuTTY key's private lines, a private JWK (`"kty"` and a
/// `"d"` of 32 or more characters), an age secret key.
fn key_material(text: &str) -> Option<(usize, String)> {
    if let Some(at) = text.find("PuTTY-User-Key-File-").filter(|_| text.contains("Private-Lines:")) {
        return Some((at, "a PuTTY private key".to_owned()));
    }
    // `kty` and a `d` key quoted or not — JSON, YAML, TOML, a JS or Python literal (outside
    // review 144: only JSON's quoted keys were read).
    if text.contains("kty") {
        let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
        let d = text.match_indices('d').map(|(at, _)| at).find(|&at| {
            let before = text.get(..at).and_then(|t| t.chars().next_back());
            let after = text.get(at + 1..).unwrap_or_default();
            if before.is_some_and(ident) || after.chars().next().is_some_and(ident) {
                return false;
            }
            let rest = after.trim_start_matches(['"', '\'']).trim_start();
            let Some(rest) = rest.strip_prefix([':', '=']) else { return false };
            let value = rest.trim_start().trim_start_matches(['"', '\'']);
            value.chars().take(32).take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_')).count()
                >= 32
        });
        if let Some(at) = d {
            return Some((at, "a private JSON Web Key".to_owned()));
        }
    }
    let lower = text.to_ascii_lowercase();
    lower
        .match_indices("age-secret-key-1")
        .map(|(at, _)| at)
        .find(|&at| run(window(&lower, at + 16, 64)) >= 40)
        .map(|at| (at, "an age secret key".to_owned()))
}

/// Token characters (`[A-Za-z0-9_-]`) at the start of `rest`.
fn run(rest: &str) -> usize {
    rest.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '-').count()
}

/// A provider token by its prefix and length: at a word start, or — a prefix no word ends
/// in, with a letter and a digit among its first characters — right after a letter or digit
/// (outside review 167 F1: SQLite packs a row's columns back to back, `github.comghp_…`).
fn token(text: &str) -> Option<(usize, String)> {
    let at_start = |at: usize| {
        text.get(..at).and_then(|t| t.chars().next_back()).is_none_or(|c| !c.is_ascii_alphanumeric())
    };
    // Prefixes that are common word endings (`task-`, `work_test_`, `pdf_`…) only at a word start.
    const WORD_ENDINGS: &[&str] =
        &["sk-", "AIza", "ya29.", "sk_live_", "rk_live_", "sk_test_", "rk_test_", "hf_", "npm_", "hvs."];
    let glued = |prefix: &str, body: &str, min: usize| {
        let first = body.get(..min).unwrap_or(body);
        !WORD_ENDINGS.contains(&prefix)
            && first.chars().any(|c| c.is_ascii_digit())
            && first.chars().any(|c| c.is_ascii_alphabetic())
    };
    // (prefix, least token characters after it, whose)
    const PREFIXES: &[(&str, usize, &str)] = &[
        ("ghp_", 36, "GitHub"),
        ("gho_", 36, "GitHub"),
        ("ghs_", 36, "GitHub"),
        ("ghu_", 36, "GitHub"),
        ("ghr_", 36, "GitHub"),
        ("github_pat_", 22, "GitHub"),
        ("sk-ant-", 24, "Anthropic"),
        ("sk-proj-", 24, "OpenAI"),
        ("sk-svcacct-", 24, "OpenAI"),
        ("sk-", 40, "OpenAI"),
        ("AIza", 35, "Google"),
        ("ya29.", 30, "Google OAuth"),
        ("GOCSPX-", 24, "Google OAuth client"),
        ("sk_live_", 20, "Stripe"),
        ("rk_live_", 20, "Stripe"),
        ("sk_test_", 20, "Stripe"),
        ("rk_test_", 20, "Stripe"),
        ("hf_", 30, "Hugging Face"),
        ("npm_", 36, "npm"),
        ("pypi-AgE", 50, "PyPI"),
        ("glpat-", 20, "GitLab"),
        ("hvs.", 24, "Vault"),
        ("dop_v1_", 64, "DigitalOcean"),
        ("shpat_", 32, "Shopify"),
        ("shpca_", 32, "Shopify"),
        ("shppa_", 32, "Shopify"),
        ("shpss_", 32, "Shopify"),
        ("xoxb-", 20, "Slack"),
        ("xoxp-", 20, "Slack"),
        ("xoxa-", 20, "Slack"),
        ("xoxs-", 20, "Slack"),
        ("xapp-", 20, "Slack"),
        ("hooks.slack.com/services/T", 20, "Slack webhook"),
    ];
    for (prefix, min, whose) in PREFIXES {
        let found = text.match_indices(prefix).map(|(at, _)| at).find(|&at| {
            let rest = window(text, at + prefix.len(), TOKEN_LOOK);
            // A webhook's path holds `/`.
            let webhook = prefix.starts_with("hooks.");
            let n = if webhook {
                rest.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '/').count()
            } else {
                run(rest)
            };
            let body = rest.get(..n).unwrap_or_default();
            (at_start(at) || webhook || glued(prefix, body, *min)) && n >= *min && !placeholder(body)
        });
        if let Some(at) = found {
            let article =
                if whose.starts_with(['A', 'E', 'I', 'O', 'U']) || *whose == "npm" { "an" } else { "a" };
            return Some((at, format!("{article} {whose} token")));
        }
    }
    // SendGrid: `SG.` + 22 + `.` + 43.
    if let Some(at) = text.match_indices("SG.").map(|(at, _)| at).find(|&at| {
        let rest = window(text, at + 3, TOKEN_LOOK);
        let first = run(rest);
        first >= 16
            && rest.get(first..).is_some_and(|r| r.starts_with('.') && run(r.get(1..).unwrap_or("")) >= 30)
    }) {
        return Some((at, "a SendGrid token".to_owned()));
    }
    // An AWS key id: `AKIA`/`ASIA` and exactly 16 upper-case letters and digits (the
    // documentation's `…EXAMPLE` ids aside).
    for prefix in ["AKIA", "ASIA"] {
        let found = text.match_indices(prefix).map(|(at, _)| at).find(|&at| {
            let rest = window(text, at + 4, 17);
            let id: String = rest.chars().take_while(char::is_ascii_alphanumeric).collect();
            // Glued to a lower-case letter or a digit is a packed column; to an upper-case
            // letter, a run of capitals (a base32 or an id) more likely (outside review 167 F1).
            let before = text.get(..at).and_then(|t| t.chars().next_back());
            (at_start(at) || before.is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit()))
                && id.len() == 16
                && id.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit())
                && !id.contains("EXAMPLE")
                && !placeholder(&id)
        });
        if let Some(at) = found {
            return Some((at, "an AWS access key id".to_owned()));
        }
    }
    None
}

/// A token body that is a stand-in: `xxxx`, or a run of eight of one character
/// (`ghp_xxxx…`, `AKIAXXXX…`, `dop_v1_0000…`, Slack's `T00000000/B00000000/XXXX…`), or a
/// published example value (outside review 141: documentation placeholders were refused).
fn placeholder(body: &str) -> bool {
    let lower = body.to_ascii_lowercase();
    let bytes = lower.as_bytes();
    // A unit of one to four characters repeated (`0b0b0b…`, RFC 4231's test key).
    let repeated = (1..=4).any(|unit| {
        bytes.len() >= 8 && bytes.get(..unit).is_some_and(|u| bytes.chunks(unit).all(|c| u.starts_with(c)))
    });
    lower.contains("xxxx")
        || bytes.windows(8).any(|w| w.iter().all(|b| Some(b) == w.first()))
        || repeated
        || KNOWN_EXAMPLES.iter().any(|k| body.contains(k))
}

/// Values published as examples in specifications and vendors' documentation: the OAuth 2.0
/// RFC's tokens, jwt.io's token's signature, Azurite's development key, Stripe's
/// documentation key.
const KNOWN_EXAMPLES: &[&str] = &[
    "2YotnFZFEjr1zCsicMWpAA",
    "tGzv3JOkF0XG5Qx2TlKWIA",
    "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c",
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq",
    "4eC39HqLyjWDarjtT1zdp7dc",
    // RFC 6749's Basic header, Kubernetes' documentation Secret.
    "czZCaGRSa3F0MzpnWDFmQmF0M2JW",
    "MWYyZDFlMmU2N2Rm",
    // The UUIDs documentation uses (Wikipedia's, RFC 4122's style).
    "123e4567-e89b-12d3-a456-426614174000",
    "550e8400-e29b-41d4-a716-446655440000",
];

/// Words a document uses for a stand-in value.
const STAND_INS: &[&str] = &[
    "example",
    "your",
    "xxxx",
    "placeholder",
    "changeme",
    "change-me",
    "redacted",
    "dummy",
    "fake",
    "sample",
    "test",
    "demo",
    "mock",
    "password",
    "0000",
    "123456789",
    "replace",
];

/// Whether a value reads as a secret rather than a name, a reference or a stand-in:
/// upper case, lower case and a digit among at least `mixed` characters, or a digit and a
/// letter among at least `long` with a run of 16 letters and digits (a hex or base64
/// token, not `harbor-core-credentials-v2`); not a variable or template (`$VAR`, `${…}`,
/// `{{…}}`, `<…>`, `%(…)s`), a path (`/…`, `./…`, `~/…`, a file name), a dotted reference
/// (`process.env.API_KEY2`, `var.db_password_v2`) or a value holding a stand-in word.
fn looks_secret(value: &str, mixed: usize, long: usize) -> bool {
    let lower = value.to_ascii_lowercase();
    let has = |f: fn(&char) -> bool| value.chars().any(|c| f(&c));
    let longest_run = value.split(|c: char| !c.is_ascii_alphanumeric()).map(str::len).max().unwrap_or(0);
    // Each part an identifier with two digits at most (`process.env.R2_API_TOKEN`, not a
    // Vault `s.Xk9Lp4Wz…` or `Tq7vR2m.Xk9Lp4Wz`: outside review 141 F3).
    let reference = value.contains('.')
        && value.split('.').filter(|p| !p.is_empty()).count() >= 2
        && value.split('.').all(|p| {
            p.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && p.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                && p.chars().filter(char::is_ascii_digit).count() <= 2
                && alternations(p) <= 4
        });
    const FILES: &[&str] = &[
        ".pem", ".key", ".crt", ".cer", ".json", ".yml", ".yaml", ".txt", ".p12", ".pfx", ".env", ".cfg",
        ".conf", ".ini", ".toml", ".jks",
    ];
    let path = value.starts_with(['/', '~'])
        || value.starts_with("./")
        || value.starts_with("../")
        || FILES.iter().any(|ext| lower.ends_with(ext));
    let shape = (value.len() >= mixed && has(char::is_ascii_uppercase) && has(char::is_ascii_lowercase))
        || (value.len() >= long && longest_run >= 16 && has(char::is_ascii_alphabetic))
        // A UUID, as npm's `_authToken` and Heroku's API key are (outside review 175 F3).
        || (uuid(value) && has(char::is_ascii_alphabetic));
    shape
        && has(char::is_ascii_digit)
        && !value.starts_with(['$', '{', '<', '%', '#', '!', '&', '*', '@', '?', '='])
        && !value.contains("://")
        && !reference
        && !path
        && !STAND_INS.iter().any(|w| lower.contains(w))
        && !placeholder(value)
        // A JWT is read as one (`jwt`); a shortened one in a document is none.
        && !value.starts_with("eyJ")
        // A stand-in encoded in base64 (`Y2hhbmdlbWU=`: `changeme`).
        && !decodes_to_stand_in(value)
}

/// Whether `value` is a UUID (`8-4-4-4-12` hex digits) of at least eight distinct digits
/// (not a pattern such as `aaaaaaaa-bbbb-…`).
fn uuid(value: &str) -> bool {
    let groups: Vec<&str> = value.split('-').collect();
    let mut distinct: Vec<u8> =
        value.bytes().filter(u8::is_ascii_hexdigit).map(|b| b.to_ascii_lowercase()).collect();
    distinct.sort_unstable();
    distinct.dedup();
    groups.iter().map(|g| g.len()).eq([8, 4, 4, 4, 12])
        && groups.iter().all(|g| g.bytes().all(|b| b.is_ascii_hexdigit()))
        && distinct.len() >= 8
}

/// The BIP39 English word list (2,048 words, sorted, one a line; from the `bip39` crate, CC0).
const BIP39_ENGLISH: &str = include_str!("bip39_english.txt");

/// A wallet's recovery phrase (BIP39) near a key that names one — `mnemonic`, `seed phrase`,
/// `recovery phrase`, `secret phrase`, `seed words`, `wallet phrase`, `backup phrase` in any
/// case or spelling, or `seed`, `phrase`, `passphrase` with `:`, `=` or a call's `(` after it
/// (`fromMnemonic("…")`, `fromPhrase("…")`) — within [`LOOK`] bytes on either side (a value
/// before its name, `{"value": "…", "name": "MNEMONIC"}`; a Terraform `type =` line before
/// `default =`: outside review 184 F1): a run of 12 or more BIP39 English words, 8 or more of
/// them distinct, read past blanks, line breaks, punctuation, quotes, brackets, list marks
/// and numbers, in any case. The word list decides (outside reviews 175 F3 … 184 F1: the
/// shape alone refused seed data, assembler mnemonics and UI strings, and the rules that
/// kept those out let phrases through); the published all-`abandon` test phrase is not one
/// (fewer than 8 distinct). The runs are found in one pass over the text, then each key
/// looks for one near it.
fn mnemonic(text: &str) -> Option<usize> {
    const KEYS: &[&str] = &[
        "mnemonic",
        "secretwords",
        "walletsecret",
        "seedphrase",
        "recoveryphrase",
        "secretphrase",
        "seedwords",
        "recoverywords",
        "walletphrase",
        "backupphrase",
        "privatekey",
        "passphrase",
        "seed",
        "phrase",
    ];
    let lower = text.to_ascii_lowercase();
    let mut starts: Vec<usize> =
        ["mnemonic", "seed", "recovery", "secret", "wallet", "backup", "phrase", "private"]
            .iter()
            .flat_map(|k| lower.match_indices(k).map(|(at, _)| at))
            .collect();
    // No key naming a phrase: nothing to read (the common case, decided before any word is).
    if starts.is_empty() {
        return None;
    }
    starts.sort_unstable();
    static LISTED: std::sync::OnceLock<Vec<&'static str>> = std::sync::OnceLock::new();
    let listed = LISTED.get_or_init(|| BIP39_ENGLISH.lines().collect());
    // The runs of listed words: `(start, end)` byte offsets.
    let mut runs: Vec<(usize, usize)> = Vec::new();
    let mut run: Vec<&str> = Vec::new();
    let mut run_start = 0;
    let mut run_end = 0;
    let mut close = |run: &mut Vec<&str>, start: usize, end: usize| {
        let mut distinct = run.clone();
        distinct.sort_unstable();
        distinct.dedup();
        if run.len() >= 12 && distinct.len() >= 8 {
            runs.push((start, end));
        }
        run.clear();
    };
    // Tokens: runs of ASCII letters and digits, by byte offset.
    let bytes = lower.as_bytes();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes.get(i).is_some_and(u8::is_ascii_alphanumeric) {
            let from = i;
            while bytes.get(i).is_some_and(u8::is_ascii_alphanumeric) {
                i += 1;
            }
            tokens.push((from, lower.get(from..i).unwrap_or_default()));
        } else {
            i += 1;
        }
    }
    for (here, token) in tokens {
        if token.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        if token.len() <= 8 && listed.binary_search(&token).is_ok() {
            if run.is_empty() {
                run_start = here;
            }
            run.push(token);
            run_end = here + token.len();
        } else {
            close(&mut run, run_start, run_end);
        }
    }
    close(&mut run, run_start, run_end);
    if runs.is_empty() {
        return None;
    }
    let squeezed = |t: &str| -> String { t.chars().filter(|c| c.is_ascii_alphanumeric()).collect() };
    starts.into_iter().find(|&at| {
        let key = window(&lower, at, 20);
        let Some(k) = KEYS.iter().find(|k| squeezed(key).starts_with(**k)) else { return false };
        let mut letters = 0;
        let end = key
            .char_indices()
            .find(|(_, c)| {
                letters += usize::from(c.is_ascii_alphanumeric());
                letters == k.len()
            })
            .map_or(key.len(), |(i, c)| i + c.len_utf8());
        let after = window(&lower, at + end, LOOK);
        let after = after.trim_start_matches(|c: char| c.is_ascii_alphanumeric() || c == '_');
        // `seed`, `phrase`, `passphrase` alone only as a key: an operator, or a call.
        let operator = after.trim_start_matches(['"', '\'']).trim_start().starts_with([':', '=', '(']);
        if matches!(*k, "seed" | "phrase" | "passphrase") && !operator {
            return false;
        }
        // A common key (`seed`, `phrase`, `passphrase`) holds the phrase itself: the run
        // begins right after it, past separators and numbers only (outside review 185 F2:
        // `random.seed(42)` or `const seed = 1234;` followed by a list of twelve nouns was
        // refused); a key that names a phrase may stand farther from it, on either side.
        if matches!(*k, "seed" | "phrase" | "passphrase") {
            let value_at = at + end;
            let first = lower.get(value_at..).and_then(|rest| {
                rest.char_indices()
                    .find(|(_, c)| c.is_ascii_alphabetic())
                    .filter(|(i, _)| rest.get(..*i).is_some_and(|gap| gap.len() <= 64))
                    .map(|(i, _)| value_at + i)
            });
            // (The key may itself be a listed word the run begins with: `seed`.)
            return first.is_some_and(|first| runs.iter().any(|(from, to)| (*from..*to).contains(&first)));
        }
        let (near_from, near_to) = (at.saturating_sub(LOOK), at + end + LOOK);
        // The first run ending after `near_from`: near if it starts before `near_to`.
        let i = runs.partition_point(|(_, run_end)| *run_end < near_from);
        runs.get(i).is_some_and(|(run_start, _)| *run_start <= near_to)
    })
}

/// An ed25519 key pair's 64 bytes written as a list — `[…]`, `(…)` or `{…}` of decimal or
/// `0x` hexadecimal bytes, as Solana's CLI writes `id.json`, a JS `Uint8Array.from([…])`, a C
/// initialiser or a Python tuple holds them (outside reviews 175 F3, 178 F4): 64 values,
/// 40 or more distinct and 16 or more at 128 or above, as random bytes have — a permutation
/// of 0–63 (JPEG's zig-zag order, a Bayer matrix), a quantisation table or character codes
/// have not. Each look stops at the first character that cannot be in such a list, and the
/// next starts past it.
fn byte_array_key(text: &str) -> Option<usize> {
    let mut past = 0;
    for (at, open) in text.match_indices(['[', '(', '{']) {
        if at < past {
            continue;
        }
        let close = match open {
            "[" => ']',
            "(" => ')',
            _ => '}',
        };
        let body = text.get(at + 1..).unwrap_or_default();
        let len = body
            .find(|c: char| {
                !(c.is_ascii_hexdigit() || matches!(c, ',' | 'x' | 'X' | 'u') || c.is_whitespace())
            })
            .unwrap_or(body.len());
        past = at + 1 + len;
        if !body.get(len..).is_some_and(|r| r.starts_with(close)) {
            continue;
        }
        let byte = |v: &str| -> Option<u8> {
            // A Rust `12u8` too (outside review 180 F9).
            let v = v.trim();
            let v = v.strip_suffix("u8").unwrap_or(v);
            match v.strip_prefix("0x").or_else(|| v.strip_prefix("0X")) {
                Some(hex) => u8::from_str_radix(hex, 16).ok(),
                None => v.parse().ok(),
            }
        };
        let inside = body.get(..len).unwrap_or_default().trim().trim_end_matches(',');
        let values: Vec<Option<u8>> = inside.split(',').map(byte).collect();
        if values.len() == 64 && values.iter().all(Option::is_some) && random_bytes(&values) {
            return Some(at);
        }
    }
    // A YAML block list of 64 bytes, one `- N` a line (outside review 180 F9).
    let mut run: Vec<Option<u8>> = Vec::new();
    let mut run_at = 0;
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        let item = line.trim().strip_prefix("- ").map(|v| v.trim().parse::<u8>().ok());
        match item {
            Some(Some(b)) => {
                if run.is_empty() {
                    run_at = offset;
                }
                run.push(Some(b));
                if run.len() == 64 && random_bytes(&run) {
                    return Some(run_at);
                }
            }
            _ => run.clear(),
        }
        offset += line.len();
    }
    None
}

/// Whether 64 values read as random bytes rather than a table: 40 or more distinct, 16 or
/// more at 128 or above, no value more than four times (an RGBA palette's 255s), and 20 or
/// more turns between rising and falling (a ramp or a gamma table has none: outside review
/// 180 F8).
fn random_bytes(values: &[Option<u8>]) -> bool {
    let bytes: Vec<u8> = values.iter().flatten().copied().collect();
    let mut sorted = bytes.clone();
    sorted.sort_unstable();
    let most = sorted.chunk_by(|a, b| a == b).map(<[u8]>::len).max().unwrap_or(0);
    sorted.dedup();
    let high = bytes.iter().filter(|b| **b >= 128).count();
    let rising: Vec<bool> = bytes
        .windows(2)
        .filter_map(|w| w.first().zip(w.get(1)))
        .filter(|(a, b)| a != b)
        .map(|(a, b)| b > a)
        .collect();
    let turns = rising.windows(2).filter(|w| w.first() != w.get(1)).count();
    bytes.len() == values.len() && sorted.len() >= 40 && high >= 16 && most <= 4 && turns >= 20
}

/// Whether `value` is base64 of printable text holding a stand-in word.
fn decodes_to_stand_in(value: &str) -> bool {
    if !value.len().is_multiple_of(4)
        || !value.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '/' | '='))
    {
        return false;
    }
    let decoded = base64_decode(value);
    decoded.iter().all(|b| b.is_ascii_graphic() || *b == b' ')
        && STAND_INS.iter().any(|w| String::from_utf8_lossy(&decoded).to_ascii_lowercase().contains(w))
}

/// How often `part` changes between upper case, lower case and digits (`githubToken2`: 3,
/// a random `Tq7vR2m`: 6).
fn alternations(part: &str) -> usize {
    let class = |c: char| (c.is_ascii_uppercase(), c.is_ascii_lowercase(), c.is_ascii_digit());
    let classes: Vec<_> = part.chars().filter(char::is_ascii_alphanumeric).map(class).collect();
    classes.windows(2).filter(|w| w.first() != w.get(1)).count()
}

/// The words of an identifier, lower case: split at `_`, `-`, `.`, a lower-to-upper case
/// change and a letter-digit change (`awsSecretAccessKey` → aws secret access key,
/// `PASSWORD2` → password 2).
fn words(id: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut word = String::new();
    let mut prev: Option<char> = None;
    for c in id.chars() {
        let split = match prev {
            _ if !c.is_ascii_alphanumeric() => {
                if !word.is_empty() {
                    out.push(std::mem::take(&mut word));
                }
                prev = None;
                continue;
            }
            Some(p) => {
                (p.is_ascii_lowercase() && c.is_ascii_uppercase())
                    || (p.is_ascii_digit() != c.is_ascii_digit())
            }
            None => false,
        };
        if split && !word.is_empty() {
            out.push(std::mem::take(&mut word));
        }
        word.push(c.to_ascii_lowercase());
        prev = Some(c);
    }
    if !word.is_empty() {
        out.push(word);
    }
    out
}

/// Whether an identifier names a secret: its words, less a trailing number, version or
/// environment (`_2`, `_v2`, `_PROD`), end in a name below — joined (`clientSecret`,
/// `PGPASSWORD`, `app.api.key`, `SECRET_KEY_BASE`) or, for the short ones, as the last
/// word (`DB_PASS`, `MYSQL_PWD`, `GITHUB_PAT`, `auth`).
fn names_secret(id: &str) -> bool {
    const JOINED: &[&str] = &[
        "password",
        "passwd",
        "passphrase",
        "secret",
        "token",
        "apikey",
        "secretkey",
        "secretaccesskey",
        "accountkey",
        "privatekey",
        "signingkey",
        "encryptionkey",
        "masterkey",
        "secretkeybase",
        "credential",
        "credentials",
        "bearer",
        "sharedaccesskey",
    ];
    const LAST: &[&str] = &["pwd", "pass", "pat", "auth"];
    let mut w = words(id);
    while w.last().is_some_and(|l| {
        l.chars().all(|c| c.is_ascii_digit())
            || (l.len() <= 3 && l.starts_with('v') && l.chars().skip(1).all(|c| c.is_ascii_digit()))
            || ["prod", "production", "dev", "development", "staging", "stage", "live", "local", "primary"]
                .contains(&l.as_str())
    }) {
        w.pop();
    }
    let joined = w.concat();
    // Cursors and idempotency keys, not credentials (outside review 144: `nextPageToken`;
    // 178 F6: AWS's `ClientToken`, `--client-request-token`, `nextToken`).
    const NOT_CREDENTIALS: &[&str] = &[
        "pagetoken",
        "continuationtoken",
        "synctoken",
        "cursortoken",
        "nexttoken",
        "clienttoken",
        "clientrequesttoken",
        "requesttoken",
        "idempotencytoken",
        "idempotencykey",
        // Outside review 180 F8: handles, not credentials.
        "locktoken",
        "cancellationtoken",
        "resumetoken",
    ];
    if NOT_CREDENTIALS.iter().any(|n| joined.ends_with(n)) {
        return false;
    }
    // `pat` only for an access token's usual names (`GITHUB_PAT`, `CR_PAT`): `HEX_PAT`,
    // `URL_PAT` are patterns (outside review 169 F2: urllib3's `HEX_PAT` refused pip).
    const PAT_OWNERS: &[&str] = &[
        "github",
        "gh",
        "gitlab",
        "gl",
        "cr",
        "ado",
        "azure",
        "devops",
        "bitbucket",
        "docker",
        "hub",
        "git",
        "my",
        "personal",
        "access",
        "npm",
        "hf",
    ];
    let pat = w.last().is_some_and(|l| l == "pat")
        && w.len() >= 2
        && w.iter().rev().skip(1).all(|word| PAT_OWNERS.contains(&word.as_str()));
    JOINED.iter().any(|n| joined.ends_with(n))
        || pat
        || w.last().is_some_and(|l| l != "pat" && LAST.contains(&l.as_str()))
}

/// A value assigned to a key that names a secret: the key (an identifier, quoted or not),
/// then — skipping blanks, one line break, quotes, an operator (`=`, `:`, `:=`, `?=`, `+=`,
/// `=>`, an XML `>`), YAML's block and flow marks (`|`, `>-`, `- `), an anchor or tag, a
/// type (`: String =`) or a `value:` key on the next line (a Kubernetes `env` pair) — the
/// value, read whole if quoted (no blank in it), else to a blank or delimiter.
fn assigned(text: &str) -> Option<(usize, String)> {
    let ident = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.');
    let mut start = None;
    for (at, c) in text.char_indices().chain(std::iter::once((text.len(), ' '))) {
        if ident(c) {
            start = start.or(Some(at));
            continue;
        }
        let Some(from) = start.take() else { continue };
        let id = text.get(from..at).unwrap_or_default();
        // A variable read (`${AUTH_TOKEN:-…}`, `$TOKEN`, `%(password)s`), not a key.
        let before = text.get(..from).unwrap_or_default();
        // `$password = '…'` (PHP, Perl) assigns (outside review 169 F1): read on.
        let assigns = before.ends_with('$') && {
            let after = window(text, at, 16).trim_start_matches([' ', '\t']);
            after.starts_with('=') && !after.starts_with("==")
        };
        if (before.ends_with('$') && !assigns) || before.ends_with("${") || before.ends_with("%(") {
            continue;
        }
        // A name/value pair with its value first (`{"value": "…", "name": "DB_PASSWORD"}`,
        // `- value: …` then `name: …`: outside review 144): the pair's name, within the
        // next 200 bytes, names a secret.
        if id.eq_ignore_ascii_case("value")
            && value_after(window(text, at, LOOK)) == Some(true)
            && let Some(name) = pair_name(text, at)
        {
            return Some((from, format!("a secret assigned to `{name}`")));
        }
        if names_secret(id) && value_after(window(text, at, LOOK)).is_some_and(|v| v) {
            return Some((from, format!("a secret assigned to `{}`", id.trim_matches(['-', '.']))));
        }
    }
    // SQL's `IDENTIFIED BY '…'`, MySQL's `-p…`, curl's `-u user:…`.
    let lower = text.to_ascii_lowercase();
    for (marker, what) in [("identified by '", "a SQL password"), ("identified by \"", "a SQL password")] {
        if let Some(at) = lower.match_indices(marker).map(|(at, _)| at).find(|&at| {
            let rest = window(text, at + marker.len(), LOOK);
            rest.split(['\'', '"']).next().is_some_and(|v| looks_secret(v, 8, 20))
        }) {
            return Some((at, what.to_owned()));
        }
    }
    for (marker, what) in [(" -u ", "a curl password"), (" --user ", "a curl password")] {
        if let Some(at) = text.match_indices(marker).map(|(at, _)| at).find(|&at| {
            let rest = window(text, at + marker.len(), LOOK);
            let arg =
                rest.trim_start_matches(['"', '\'']).split(|c: char| c.is_whitespace() || "\"'".contains(c));
            arg.take(1).any(|a| a.split_once(':').is_some_and(|(_, p)| url_secret(p)))
        }) {
            return Some((at, what.to_owned()));
        }
    }
    if lower.contains("mysql")
        && let Some(at) = text.match_indices(" -p").map(|(at, _)| at).find(|&at| {
            let rest = window(text, at + 3, LOOK);
            rest.split(|c: char| c.is_whitespace()).next().is_some_and(|v| looks_secret(v, 8, 20))
        })
    {
        return Some((at, "a MySQL password".to_owned()));
    }
    None
}

/// The `name` of the pair whose `value` ends at `at`, if it names a secret and follows
/// within 200 bytes.
fn pair_name(text: &str, at: usize) -> Option<String> {
    let end = (at..=at + 200).rev().find(|&i| text.is_char_boundary(i)).unwrap_or(at).min(text.len());
    let window = text.get(at..end).unwrap_or_default();
    window.match_indices("name").find_map(|(i, _)| {
        let rest = window.get(i + 4..).unwrap_or_default().trim_start_matches(['"', '\'']).trim_start();
        let rest = rest.strip_prefix([':', '='])?.trim_start().trim_start_matches(['"', '\'']);
        let id: String =
            rest.chars().take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.')).collect();
        names_secret(&id).then_some(id)
    })
}

/// What follows a key naming a secret: `Some(true)` when it is a value that reads as a
/// secret ([`assigned`]).
fn value_after(rest: &str) -> Option<bool> {
    // The key's own closing quote, right after it.
    let mut rest = rest.strip_prefix(['"', '\'', '`']).unwrap_or(rest);
    // A block after the key (Terraform's `variable "db_password" { … default = "…" }`, as
    // `terraform fmt` writes it over lines: outside review 144): its `default`.
    if let Some(block) = rest.trim_start().strip_prefix('{') {
        let body = block.split('}').next().unwrap_or_default();
        return Some(body.lines().any(|line| {
            let line = line.trim_start().trim_start_matches('{').trim_start();
            line.strip_prefix("default").is_some_and(|r| value_after(r) == Some(true))
        }));
    }
    let mut line_breaks = 0;
    // Whether an operator, mark or quote stood between the key and the value: without one
    // (blanks or a line break alone) the value must read as a random token, not a word or a
    // name (outside review 169 F2: "Let pass ForX2…", a line ending "token" before
    // `Update2FASettingsPage` were refused).
    let mut marked = false;
    for _ in 0..12 {
        let trimmed = rest.trim_start_matches(|c: char| c.is_whitespace() && c != '\n');
        // A string literal's prefix — Python's `b''`, `r""`, `f""`, `u''`, C#'s `@""`,
        // `$""`, C++'s `L""`, `u8""`, `R""` (outside review 169 F1: each hid the value).
        let trimmed = literal_prefix(trimmed).map_or(trimmed, |n| trimmed.get(n..).unwrap_or(trimmed));
        if let Some(r) = trimmed.strip_prefix('\n') {
            line_breaks += 1;
            if line_breaks > 1 {
                return None;
            }
            rest = r;
            continue;
        }
        if let Some((op, r)) = [
            ":=", "?=", "+=", "=>", "==", "<-", "|-", "|+", ">-", ">+", "=", ":", ">", "|", "- ", ",", "]",
            "(", "{", "**",
        ]
        .iter()
        .find_map(|op| trimmed.strip_prefix(op).map(|r| (op, r)))
        {
            // An assignment or a call's argument marks a value; a list or block mark alone
            // does not (`token\n- Update2FASettingsPage` is a list item after prose).
            marked |= [":=", "?=", "+=", "=>", "==", "<-", "=", ":", ">", "("].contains(op);
            rest = r;
            continue;
        }
        // A YAML anchor or tag (a CloudFormation `!Ref`, `!Sub`, `!GetAtt`: a reference).
        if let Some(r) = trimmed.strip_prefix(['&', '!']) {
            let (word, after) = r.split_at(r.find(char::is_whitespace).unwrap_or(r.len()));
            if ["Ref", "Sub", "GetAtt", "ImportValue", "FindInMap"].contains(&word.trim_start_matches('!')) {
                return None;
            }
            rest = after;
            continue;
        }
        if let Some(r) = trimmed.strip_prefix(['"', '\'', '`']) {
            // A quoted value, whole: no blank in it (a sentence is no secret).
            let quote = trimmed.chars().next().unwrap_or('"');
            // A triple-quoted string (Python, Kotlin: outside review 169 F1).
            let triple: String = [quote, quote].iter().collect();
            let r = r.strip_prefix(triple.as_str()).unwrap_or(r);
            let value = r.split(quote).next().unwrap_or_default();
            // The `"value"` key of a JSON name/value pair (outside review 141 F2).
            let after = r.get(value.len() + quote.len_utf8()..).unwrap_or_default();
            if SKIPPED_WORDS.contains(&value) && after.trim_start().starts_with([':', '=']) {
                rest = after;
                marked = true;
                continue;
            }
            return Some(!value.chars().any(char::is_whitespace) && quoted_secret(value));
        }
        // A type or the `value` key of a name/value pair.
        let word: String = trimmed.chars().take_while(char::is_ascii_alphabetic).collect();
        if SKIPPED_WORDS.contains(&word.as_str())
            && trimmed.get(word.len()..).is_some_and(|t| t.trim_start().starts_with([':', '=']))
        {
            rest = trimmed.get(word.len()..).unwrap_or_default();
            continue;
        }
        let value = trimmed
            .split(|c: char| c.is_whitespace() || "\"'`,;<>(){}[]|:&".contains(c))
            .next()
            .unwrap_or_default();
        // A sentence's full stop after it (`set token=….`: outside review 178 F6).
        let value = value.strip_suffix('.').filter(|v| uuid(v)).unwrap_or(value);
        // A call is no secret (`auth = ApiGatewayV2WSAuthorizer(…)`: outside review 169 F2).
        let call = trimmed.get(value.len()..).is_some_and(|t| t.starts_with('('));
        return Some(
            value.chars().all(|c| c.is_ascii_alphanumeric() || "+/=_.~!@#%^&*$?-".contains(c))
                && !call
                && (marked || alternations(value) >= 8)
                && looks_secret(value, 12, 20),
        );
    }
    None
}

/// The length of a string literal's prefix at the start of `text` — `b`, `r`, `u`, `f`,
/// `br`, `rb`, `fr`, `rf` (any case), `@`, `$`, `L`, `u8`, `R` — when a quote follows it.
fn literal_prefix(text: &str) -> Option<usize> {
    const PREFIXES: &[&str] = &["br", "rb", "fr", "rf", "u8", "b", "r", "u", "f", "@", "$", "l"];
    let lower = window(text, 0, 3).to_ascii_lowercase();
    PREFIXES
        .iter()
        .find(|p| {
            lower.starts_with(**p) && lower.get(p.len()..).is_some_and(|r| r.starts_with(['"', '\'', '`']))
        })
        .map(|p| p.len())
}

/// Words between a key and its value: a type, or the `value` of a name/value pair.
const SKIPPED_WORDS: &[&str] =
    &["String", "string", "str", "value", "Value", "SecretStr", "SecretString", "default", "sensitive"];

/// A quoted value: any printable characters but blanks and quotes.
fn quoted_secret(value: &str) -> bool {
    value.chars().all(|c| c.is_ascii_graphic()) && looks_secret(value, 12, 20)
}

/// A URL's password: 8 or more characters with a letter and a digit, not a stand-in or a
/// variable (`postgres://app:s3cretPassw0rd@db/app`; not `postgres:postgres@localhost`,
/// `root:example@…`, `…:${DB_PASSWORD}@…`).
fn url_secret(password: &str) -> bool {
    let lower = password.to_ascii_lowercase();
    password.len() >= 8
        && password.chars().any(|c| c.is_ascii_digit())
        && password.chars().any(|c| c.is_ascii_alphabetic())
        && !password.starts_with(['$', '{', '<', '%', '*'])
        && !STAND_INS.iter().any(|w| lower.contains(w))
}

/// A URL holding a password in its user part: `scheme://user:password@host`.
fn url_password(text: &str) -> Option<usize> {
    text.match_indices("://").map(|(at, _)| at).find(|&at| {
        let authority = window(text, at + 3, LOOK);
        let authority =
            authority.split(|c: char| c.is_whitespace() || "/?#\"'`<>".contains(c)).next().unwrap_or("");
        let Some((userinfo, _host)) = authority.rsplit_once('@') else { return false };
        userinfo.split_once(':').is_some_and(|(_, password)| url_secret(password))
    })
}

/// An `Authorization` header with credentials: `Basic` and a base64 `user:password`, or
/// `Bearer` and an opaque token of 24 or more characters (a JWT is read as one).
fn header(text: &str) -> Option<(usize, String)> {
    let lower = text.to_ascii_lowercase();
    for (at, _) in lower.match_indices("basic ") {
        let value: String = window(text, at + 6, LOOK)
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '/' | '='))
            .collect();
        let decoded = String::from_utf8_lossy(&base64_decode(&value)).into_owned();
        if value.len() >= 12
            && !placeholder(&value)
            && decoded.split_once(':').is_some_and(|(user, p)| !user.is_empty() && url_secret(p))
        {
            return Some((at, "a Basic authorization header".to_owned()));
        }
    }
    for (at, _) in lower.match_indices("bearer ") {
        let value = window(text, at + 7, LOOK).split(|c: char| c.is_whitespace() || "\"'`".contains(c));
        if value.take(1).any(|v| !v.starts_with("eyJ") && looks_secret(v, 24, 24)) {
            return Some((at, "a Bearer authorization header".to_owned()));
        }
    }
    None
}

/// A signed JSON Web Token (`eyJ…` header, payload and signature, each 10 or more
/// characters) or a JWE (five parts).
fn jwt(text: &str) -> Option<(usize, String)> {
    let token_char = |c: char| c.is_ascii_alphanumeric() || "-_.".contains(c);
    let mut from = 0;
    while let Some(at) = text.get(from..).and_then(|t| t.find("eyJ")).map(|i| from + i) {
        // The token runs from `at` to the end of its run of token characters.
        let rest = text.get(at..).unwrap_or_default();
        let end = at + rest.find(|c: char| !token_char(c)).unwrap_or(rest.len());
        // Read once per run, not once per `eyJ` in it (outside review 167 F2: quadratic in a
        // run of `eyJ…` pieces): a token has three or five parts, so only the first `eyJ` of
        // each of the run's last five parts can start one.
        let run = text.get(at..end).unwrap_or_default();
        let tail_at = run.rmatch_indices('.').nth(4).map_or(at, |(i, _)| at + i + 1);
        let mut starts = vec![at];
        let mut part_at = tail_at;
        for part in text.get(tail_at..end).unwrap_or_default().split('.') {
            if let Some(i) = part.find("eyJ") {
                starts.push(part_at + i);
            }
            part_at += part.len() + 1;
        }
        starts.dedup();
        for start in starts.into_iter().filter(|&s| s >= at) {
            let token = text.get(start..end).unwrap_or_default();
            let parts: Vec<&str> = token.split('.').collect();
            let jws = parts.len() == 3
                && parts.iter().all(|p| p.len() >= 10)
                && parts.get(1).is_some_and(|p| p.starts_with("eyJ"));
            let jwe = parts.len() == 5 && parts.iter().filter(|p| p.len() >= 10).count() >= 3;
            if (jws || jwe) && !placeholder(token) {
                return Some((start, "a JSON Web Token".to_owned()));
            }
        }
        from = end.max(at + 3);
    }
    None
}

/// Runs of base64 in `text`, each with where it starts: pieces of 16 or more base64 or
/// base64url characters joined across what wraps them — blanks, line breaks, quotes,
/// commas, brackets, a JSON `\n` — until a shorter piece or another character ends the
/// run; runs of 20 or more characters (outside review 141 F1: a base64 token under 64 was
/// never decoded).
fn base64_runs(text: &str) -> Vec<(usize, String)> {
    const MIN_RUN: usize = 20;
    let b64 = |c: char| c.is_ascii_alphanumeric() || matches!(c, '+' | '/' | '=' | '-' | '_');
    let mut runs = Vec::new();
    let (mut run, mut run_at) = (String::new(), 0usize);
    let (mut piece, mut piece_at) = (String::new(), 0usize);
    let mut chars = text.char_indices().peekable();
    let end_piece = |piece: &mut String,
                     piece_at: usize,
                     run: &mut String,
                     run_at: &mut usize,
                     runs: &mut Vec<(usize, String)>| {
        // A key before the value (`KEY=LS0t…`): the piece starts after its last `=` that
        // is not padding.
        let mut piece_at = piece_at;
        if let Some(i) = piece.trim_end_matches('=').rfind('=') {
            let after = piece.split_off(i + 1);
            *piece = after;
            piece_at += i + 1;
        }
        if piece.len() >= 16 {
            if run.is_empty() {
                *run_at = piece_at;
            }
            run.push_str(piece);
        } else {
            if run.len() >= MIN_RUN {
                runs.push((*run_at, std::mem::take(run)));
            }
            run.clear();
        }
        piece.clear();
    };
    while let Some((at, c)) = chars.next() {
        if b64(c) {
            if piece.is_empty() {
                piece_at = at;
            }
            piece.push(c);
            continue;
        }
        let glue = c.is_whitespace() || "\"',[]".contains(c);
        // A JSON string's `\n` or `\r` wraps too.
        let escape = c == '\\' && chars.peek().is_some_and(|(_, n)| matches!(n, 'n' | 'r'));
        if escape {
            chars.next();
        }
        if !piece.is_empty() {
            end_piece(&mut piece, piece_at, &mut run, &mut run_at, &mut runs);
        }
        if !(glue || escape) {
            if run.len() >= MIN_RUN {
                runs.push((run_at, std::mem::take(&mut run)));
            }
            run.clear();
        }
    }
    if !piece.is_empty() {
        end_piece(&mut piece, piece_at, &mut run, &mut run_at, &mut runs);
    }
    if run.len() >= MIN_RUN {
        runs.push((run_at, run));
    }
    runs
}

/// A DER private key: a SEQUENCE whose first element is version 0 then an
/// AlgorithmIdentifier (PKCS #8) or an INTEGER (PKCS #1), version 1 then an OCTET STRING
/// (SEC 1), or version 3 then a SEQUENCE (a PKCS #12 store). A certificate or a public key
/// (a SEQUENCE first) is not one.
fn der_private_key(der: &[u8]) -> bool {
    let body = match der {
        [0x30, 0x82, _, _, rest @ ..] | [0x30, 0x81, _, rest @ ..] => rest,
        [0x30, len, rest @ ..] if *len < 0x80 => rest,
        _ => return false,
    };
    der.len() >= 48
        && matches!(
            body,
            [0x02, 0x01, 0x00, 0x30 | 0x02, ..] | [0x02, 0x01, 0x01, 0x04, ..] | [0x02, 0x01, 0x03, 0x30, ..]
        )
}

/// Standard or URL-safe base64 (padding optional), decoded up to the first character
/// outside the alphabet.
fn base64_decode(text: &str) -> Vec<u8> {
    let value = |c: u8| match c {
        b'A'..=b'Z' => Some(c - b'A'),
        b'a'..=b'z' => Some(c - b'a' + 26),
        b'0'..=b'9' => Some(c - b'0' + 52),
        b'+' | b'-' => Some(62),
        b'/' | b'_' => Some(63),
        _ => None,
    };
    let mut out = Vec::with_capacity(text.len() / 4 * 3);
    let (mut acc, mut bits) = (0u32, 0u32);
    for c in text.bytes() {
        let Some(v) = value(c) else { break };
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)] // tests may panic

    use super::secret_in;

    /// Standard base64 with padding, written here independently of the decoder above.
    fn base64(bytes: &[u8]) -> String {
        const ABC: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        let mut out = String::new();
        for chunk in bytes.chunks(3) {
            let at = |i: usize| u32::from(*chunk.get(i).unwrap_or(&0));
            let n = (at(0) << 16) | (at(1) << 8) | at(2);
            for i in 0..4 {
                if i <= chunk.len() {
                    out.push(char::from(ABC[((n >> (18 - 6 * i)) & 63) as usize]));
                } else {
                    out.push('=');
                }
            }
        }
        out
    }

    const BODY: &str = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7VJTUt9Us8cKjMzEfYyjiWA4R4/M2bS1GB4t7NXp98C3SC6dVMvDuictGeurT8jNbvJZHtCSuYEvuNMoSfm76oqFvAp8Gy0iz5sxjZmSnXyCdPEovGhLa0VzMaQ8s";
    const V: &str = "Zk3vQ9pLx7WmB2nR8tYc4HdF6gJs1aE5uV0oKiTq";
    const P: &str = "Rv7tLq2Wz9xKp4Hm";

    /// Every form docs/profiles.md lists is refused, whatever wraps it (outside reviews
    /// 132–134, 139).
    #[test]
    fn secrets_are_refused_in_every_form_read() {
        const PHRASE: &str = "orbit lumber velvet crane motion ivory fabric salad census blossom tackle quiz";
        let pem = format!("-----BEGIN PRIVATE KEY-----\n{BODY}\n-----END PRIVATE KEY-----\n");
        let b64 = base64(pem.as_bytes());
        let wrapped: Vec<String> =
            b64.as_bytes().chunks(76).map(|c| String::from_utf8(c.to_vec()).unwrap()).collect();
        let yes = [
            pem.clone(),
            format!("notes\n  -----BEGIN RSA PRIVATE KEY-----\r\n  {BODY}\r\n  -----END RSA PRIVATE KEY-----\n"),
            format!(r#"{{"type": "service_account", "private_key": "{}"}}"#, pem.replace('\n', "\\n")),
            format!("AGE-SECRET-KEY-1{}", "Q".repeat(58)),
            "aws_access_key_id = AKIAIOSFODNN7QWERTYU".to_owned(),
            "export GITHUB_PERSONAL_ACCESS_TOKEN=ghp_abcdefghijklmnopqrstuvwxyz0123456789".to_owned(),
            "OPENAI_API_KEY=sk-proj-abcdefghijklmnopqrstuvwxyz012345".to_owned(),
            "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".to_owned(),
            "SLACK_WEBHOOK=https://hooks.slack.com/services/T0A1B2C3D/B0E4F5G6H/aBcDeFgHiJkLmNoPqRsTuVwX".to_owned(),
            format!("hvs.{V}"),
            format!("dop_v1_{}", "a1b2c3d4".repeat(8)),
            // Base64: one line, wrapped and indented, in a JSON array, shifted, twice.
            format!("tls.key: {b64}"),
            format!("data:\n  server.key: |\n{}", wrapped.iter().map(|l| format!("    {l}\n")).collect::<String>()),
            format!(r#"{{"key": [{}]}}"#, wrapped.iter().map(|l| format!("\"{l}\"")).collect::<Vec<_>>().join(",")),
            format!("tls.key: {}", base64(format!("# generated\n{pem}").as_bytes())),
            format!("key: {}", base64(b64.as_bytes())),
            format!("KEY={b64}"),
            // DER without armor.
            format!("key: {BODY}"),
            format!(r#"{{"private_key": "{BODY}"}}"#),
            // Key material.
            "PuTTY-User-Key-File-3: ssh-ed25519\nPrivate-Lines: 1\nAAAAIE9aCqLz2bRkq8hXJ7mN5eT4Wn3x\n".to_owned(),
            r#"{"kty":"EC","crv":"P-256","d":"jpsQnnGQmL-YBIffH1136cspYG6-0iY7X1fCE9-E9LI"}"#.to_owned(),
            // Assigned to a key naming a secret, in many spellings and forms.
            format!("awsSecretAccessKey: {V}"),
            format!(r#"{{"secretAccessKey": "{V}"}}"#),
            format!("SECRET_ACCESS_KEY={V}"),
            format!("app.api.key={V}"),
            format!("MYSQL_PWD={P}"),
            format!("DB_PASS={P}"),
            format!("GITHUB_PAT={V}"),
            format!("RAILS_MASTER_KEY={V}"),
            format!("DB_PASSWORD_PROD={P}"),
            format!("PASSWORD2={P}"),
            format!("password: |\n  {P}\n"),
            format!("password: >-\n  {P}\n"),
            format!("password: &pw {P}"),
            format!("password: !!str {P}"),
            format!("{{\n  \"password\":\n    \"{P}\"\n}}"),
            format!("env:\n  - name: DB_PASSWORD\n    value: {P}\n"),
            format!("<password>{P}</password>"),
            format!(r#"<add key="ApiKey" value="{V}" />"#),
            format!(r#"val password: String = "{P}""#),
            format!("ENV DB_PASSWORD {P}"),
            format!("DB_PASSWORD ?= {P}"),
            format!("set -x DB_PASSWORD {P}"),
            format!("password:\u{a0}{P}"),
            format!("| DB_PASSWORD | {P} |"),
            format!("Server=db;Uid=sa;Pwd={P};"),
            "DB_PASSWORD=Xk9$mP2vL7qR!w4Z".to_owned(),
            "token: 9f86d081884c7d659a2feaa0".to_owned(),
            format!("CREATE USER 'app'@'%' IDENTIFIED BY '{P}';"),
            format!("curl -u admin:{P} https://api.corp/"),
            format!("mysql -uroot -p{P} db"),
            // URLs and headers.
            "DATABASE_URL=postgres://app:s3cretPassw0rd@db.internal:5432/app".to_owned(),
            "https://bot:Xk9$mP2vL7qR!w4Z@git.corp/repo.git".to_owned(),
            format!("Authorization: Basic {}", base64(format!("admin:{P}").as_bytes())),
            format!("Authorization: Bearer {V}"),
            "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U".to_owned(),
            // Outside review 141.
            format!("stripe: {}", base64(b"sk_live_51HaBcDeFgHiJkLmNoPqRsT")),
            format!(r#"{{"name":"DB_PASSWORD","value":"{P}"}}"#),
            format!("env: [{{name: DB_PASSWORD, value: {P}}}]"),
            "VAULT_TOKEN=s.Xk9Lp4WzTq7LmRt6Yp2QaBc3".to_owned(),
            "password: Tq7vR2m.Xk9Lp4Wz".to_owned(),
            format!(r#"{{"SecretString": "{{\"username\":\"admin\",\"password\":\"{P}\"}}"}}"#),
            format!(r#"os.environ["OPENAI_API_KEY"] = "{V}""#),
            format!(r#"ds.setPassword("{P}");"#),
            format!("variable \"db_password\" {{ default = \"{P}\" }}"),
            format!("Endpoint=sb://x.servicebus.windows.net/;SharedAccessKeyName=Root;SharedAccessKey={V}="),
            // Outside review 144.
            format!("jwk:\n  kty: OKP\n  crv: Ed25519\n  d: {V}abc\n"),
            format!("{{ kty: 'OKP', crv: 'Ed25519', d: '{V}abc' }}"),
            format!("variable \"db_password\" {{\n  type    = string\n  default = \"{P}\"\n}}\n"),
            format!(r#"{{"environment":[{{"value":"{P}","name":"DB_PASSWORD"}}]}}"#),
            format!("env:\n  - value: \"{P}\"\n    name: DB_PASSWORD\n"),
            format!("**Password:** {P}"),
            // Outside review 175 F3: a UUID token, a recovery phrase, a Solana keypair.
            "//registry.npmjs.org/:_authToken=5f3c9a2e-7b41-4d8e-9c06-1a2b3c4d5e6f".to_owned(),
            "HEROKU_API_KEY=0b7e4f2a-9d13-46c5-8a7e-3f2d1c0b9a84".to_owned(),
            "mnemonic: \"orbit lumber velvet crane motion ivory fabric salad census blossom tackle quiz\"".to_owned(),
            "WALLET_SEED_PHRASE=orbit lumber velvet crane motion ivory fabric salad census blossom tackle quiz".to_owned(),
            "Recovery phrase:\n  orbit lumber velvet crane motion ivory fabric salad census blossom tackle quiz\n".to_owned(),
            format!("[{}]", (0..64u32).map(|i| ((i * 97 + 13) % 256).to_string()).collect::<Vec<_>>().join(",")),
            // Outside review 178 F4–F6: other layouts of the same secrets.
            format!(
                "const k = Uint8Array.from([{}]);",
                (0..64u32).map(|i| format!("0x{:02x}", (i * 97 + 13) % 256)).collect::<Vec<_>>().join(", ")
            ),
            format!("uint8_t k[64] = {{{}}};", (0..64u32).map(|i| ((i * 89 + 7) % 256).to_string()).collect::<Vec<_>>().join(", ")),
            format!("{{\"mnemonic\": [{}]}}", PHRASE.split(' ').map(|w| format!("\"{w}\"")).collect::<Vec<_>>().join(", ")),
            format!("mnemonic:\n{}", PHRASE.split(' ').map(|w| format!("  - {w}\n")).collect::<String>()),
            format!("Recovery phrase:\n{}", PHRASE.split(' ').enumerate().map(|(i, w)| format!("{}. {w}\n", i + 1)).collect::<String>()),
            format!("mnemonic: {}", PHRASE.replace(' ', ", ")),
            format!("MNEMONIC=\"{}\n{}\"", &PHRASE[..38], &PHRASE[39..]),
            format!("seed: \"{PHRASE}\""),
            format!("const w = ethers.Wallet.fromMnemonic(\"{PHRASE}\");"),
            format!("const w = ethers.Wallet.fromPhrase(\"{PHRASE}\");"),
            // Name/value layouts (outside review 183 F3).
            format!("env:\n  - name: MNEMONIC\n    value: \"{PHRASE}\"\n"),
            format!("{{\"name\":\"MNEMONIC\",\"value\":\"{PHRASE}\"}}"),
            format!("variable \"mnemonic\" {{\n  default = \"{PHRASE}\"\n}}"),
            format!("<add key=\"Mnemonic\" value=\"{PHRASE}\"/>"),
            // Outside review 184 F1: lines between, the value before its name, `seed:` unquoted.
            format!("variable \"mnemonic\" {{\n  type = string\n  sensitive = true\n  default = \"{PHRASE}\"\n}}"),
            format!("<add value=\"{PHRASE}\" key=\"Mnemonic\"/>"),
            format!("{{\"value\": \"{PHRASE}\", \"name\": \"MNEMONIC\"}}"),
            format!("seed: {PHRASE}"),
            format!("seed: [{}]", PHRASE.replace(' ', ", ")),
            // Outside review 185 F1: other keys naming it.
            format!("SECRET_WORDS=\"{PHRASE}\""),
            format!("WALLET_SECRET=\"{PHRASE}\""),
            format!("PRIVATE_KEY=\"{PHRASE}\""),
            // A line after it (outside review 180 F7), other keys and cases.
            format!("wallet:\n  mnemonic: \"{PHRASE}\"\n  path: m/44'/60'/0'/0\n"),
            format!("accounts: {{ mnemonic: \"{PHRASE}\", path: \"m/44'/60'/0'/0\", count: 10 }}"),
            format!("MNEMONIC=\"{PHRASE}\"\nexport MNEMONIC\n"),
            format!("mnemonic = \"{PHRASE}\"\nchain = \"sepolia\"\n"),
            format!("WALLET_PHRASE={PHRASE}"),
            format!("backup phrase: {}", PHRASE.to_uppercase()),
            format!("passphrase: \"{}\"", PHRASE.split(' ').map(|w| format!("{}{}", &w[..1].to_uppercase(), &w[1..])).collect::<Vec<_>>().join(" ")),
            "curl 'https://api.example.net/v1?api_key=5f3c9a2e-7b41-4d8e-9c06-1a2b3c4d5e6f&format=json'".to_owned(),
            "Then set token=5f3c9a2e-7b41-4d8e-9c06-1a2b3c4d5e6f.".to_owned(),
            // Outside review 180 F9: a YAML block list, a Rust literal.
            format!("keypair:\n{}", (0..64u32).map(|i| format!("  - {}\n", (i * 97 + 13) % 256)).collect::<String>()),
            format!("let k = vec![{}];", (0..64u32).map(|i| format!("{}u8", (i * 89 + 7) % 256)).collect::<Vec<_>>().join(", ")),
        ];
        for y in &yes {
            assert!(secret_in(y.as_bytes()).is_some(), "{y:?}");
        }
        // The refusal says what and where.
        let found = secret_in(format!("# notes\n\nDB_PASSWORD={P}\n").as_bytes()).unwrap();
        assert_eq!(found, "a secret assigned to `DB_PASSWORD` (line 3)");
    }

    /// Stand-ins, variables, references, calls, paths, names, certificates and public keys
    /// are not secrets (outside reviews 132, 134, 139: a false refusal blocks a whole
    /// registry).
    #[test]
    fn ordinary_documentation_is_not_refused() {
        const PHRASE: &str = "orbit lumber velvet crane motion ivory fabric salad census blossom tackle quiz";
        let cert = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
        for no in [
            cert.to_owned(),
            format!("tls.crt: {}", base64(format!("-----BEGIN CERTIFICATE-----\n{}\n-----END CERTIFICATE-----\n", "MIIC+zCCAeOgAwIBAgIJALRtByJ0s".repeat(4)).as_bytes())),
            "Look for lines such as `-----BEGIN RSA PRIVATE KEY-----` in diffs.".to_owned(),
            "PEM = '-----BEGIN ' + 'PRIVATE KEY-----'".to_owned(),
            "aws_access_key_id = AKIAIOSFODNN7EXAMPLE".to_owned(),
            // UUIDs that are no credential, a test phrase, arrays that are no key.
            "request_id = 5f3c9a2e-7b41-4d8e-9c06-1a2b3c4d5e6f".to_owned(),
            "api_key: 00000000-0000-0000-0000-000000000000".to_owned(),
            "mnemonic: abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon about".to_owned(),
            "The mnemonic is twelve words; keep the recovery phrase offline and never share it with anyone ever.".to_owned(),
            format!("[{}]", (0..64u32).map(|i| (i % 8).to_string()).collect::<Vec<_>>().join(",")),
            format!("[{}]", (0..32u32).map(|i| ((i * 97 + 13) % 256).to_string()).collect::<Vec<_>>().join(",")),
            // Public tables of 64 bytes, idempotency and cursor UUIDs, prose about a phrase
            // (outside review 178 F4, F6).
            format!("ZIGZAG = [{}]", (0..64u32).map(|i| ((i * 37) % 64).to_string()).collect::<Vec<_>>().join(", ")),
            format!("LUMA_Q = [{}]", (0..64u32).map(|i| (16 + (i * 7) % 106).to_string()).collect::<Vec<_>>().join(", ")),
            format!("CODES = [{}]", (0..64u32).map(|i| (43 + i).to_string()).collect::<Vec<_>>().join(", ")),
            // Outside review 180 F8: a ramp, a gamma table, an RGBA palette, handles.
            format!("RAMP = [{}]", (0..64u32).map(|i| (i * 4).to_string()).collect::<Vec<_>>().join(", ")),
            format!(
                "GAMMA = [{}]",
                (0..64u32).map(|i| ((f64::from(i) / 63.0).powf(2.2) * 255.0).round().to_string()).collect::<Vec<_>>().join(", ")
            ),
            format!(
                "PALETTE = [{}]",
                (0..16u32).map(|i| format!("{}, {}, {}, 255", (i * 53) % 256, (i * 101) % 256, (i * 197) % 256)).collect::<Vec<_>>().join(", ")
            ),
            r#"{"lockToken": "5f3c9a2e-7b41-4d8e-9c06-1a2b3c4d5e6f"}"#.to_owned(),
            "cancellationToken = 5f3c9a2e-7b41-4d8e-9c06-1a2b3c4d5e6f".to_owned(),
            "aws ec2 run-instances --client-request-token 5f3c9a2e-7b41-4d8e-9c06-1a2b3c4d5e6f".to_owned(),
            r#"{"ClientToken": "5f3c9a2e-7b41-4d8e-9c06-1a2b3c4d5e6f"}"#.to_owned(),
            r#"{"nextToken": "5f3c9a2e-7b41-4d8e-9c06-1a2b3c4d5e6f"}"#.to_owned(),
            "idempotency_token: 5f3c9a2e-7b41-4d8e-9c06-1a2b3c4d5e6f".to_owned(),
            "mnemonic: the words are kept offline and must never be typed into any web page you open".to_owned(),
            "seed: 42".to_owned(),
            // Assembler mnemonics (outside review 182 F7).
            "Mnemonic: addi slli srai auipc jalr beq bne blt bge bltu bgeu lbu".to_owned(),
            "Mnemonic: load store move add sub jump call ret push pop halt nop".to_owned(),
            // A seeded test beside a list of nouns (outside review 185 F2).
            format!("random.seed(42)\nanimals = [{}]", PHRASE.split(' ').map(|w| format!("\"{w}\"")).collect::<Vec<_>>().join(", ")),
            format!("const seed = 1234;\nconst words = [{}];", PHRASE.split(' ').map(|w| format!("'{w}'")).collect::<Vec<_>>().join(", ")),
            "phrase: \"lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor\"".to_owned(),
            // Seed data and UI strings under generic keys (outside review 183 F4).
            "seed: [alpha, bravo, charlie, delta, echo, foxtrot, golf, hotel, india, juliet, kilo, lima]".to_owned(),
            "seed = [\"apple\", \"banana\", \"cherry\", \"grape\", \"lemon\", \"mango\", \"orange\", \"peach\", \"pear\", \"plum\", \"melon\", \"kiwi\"]".to_owned(),
            "ARM mnemonics: ldr str ldm stm push pop mov mvn add sub mul cmp".to_owned(),
            "seed: 42\nusers:\n  - alice\n  - bobby\n  - carol\n  - david\n  - erika\n  - frank\n  - grace\n  - heidi\n  - ivan\n  - judy\n  - mallory\n  - oscar\n  - peggy\n".to_owned(),
            "phrase: the quick brown fox jumps over the lazy dog again and again and again".to_owned(),
            "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY".to_owned(),
            "Set GITHUB_TOKEN to a token such as ghp_xxxx (never commit it).".to_owned(),
            "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBpV9wTK0KTCMu4xKw8f4WqzO1Nv8FQ8yMbtV9UH3nJr deploy@ci".to_owned(),
            r#""integrity": "sha512-Zk3vQ9pLx7WmB2nR8tYc4HdF6gJs1aE5uV0oKiTqZk3vQ9pLx7WmB2nR8tYc4HdF6gJs1aE5uV0oKiTq==""#.to_owned(),
            "api_key = \"YOUR_API_KEY\"".to_owned(),
            "password: hunter2".to_owned(),
            "token: ${{ secrets.GITHUB_TOKEN }}".to_owned(),
            "api_key = os.environ[\"OPENAI_API_KEY\"]".to_owned(),
            "const apiKey = process.env.OPENAI_API_KEY2;".to_owned(),
            "    secretAccessKey: process.env.R2_SECRET_ACCESS_KEY,".to_owned(),
            "  password = var.rds_aurora_v2_master_password".to_owned(),
            "  api_token = module.cloudflare_zone_v2.outputs.api_token".to_owned(),
            "let token = Secrets.githubToken2".to_owned(),
            "token = tokenizer.tokens_v2[index]".to_owned(),
            "password = forms.CharField(widget=forms.PasswordInput)".to_owned(),
            "String password = System.getenv(\"DB_PASSWORD\");".to_owned(),
            "      MasterUserPassword: !Ref DBPassword2".to_owned(),
            "  private_key: /etc/pki/tls/private/api-gw-01.key".to_owned(),
            "private_key: certs/server2024PrivateKey.pem".to_owned(),
            "    existingSecret: harbor-core-database-credentials-v2".to_owned(),
            "secret: orders-service-db-credentials-prod-v3".to_owned(),
            "secretName: webapp-tls-certificate-2024-prod".to_owned(),
            "token: 123e4567-e89b-12d3-a456-426614174000".to_owned(),
            "max_tokens: 4096".to_owned(),
            "SECRET_KEY = 'django-insecure-change-this-in-production-1234567890'".to_owned(),
            "docker run -e MSSQL_SA_PASSWORD=Password123! mcr.microsoft.com/mssql/server".to_owned(),
            "user = User.objects.create_user(\"alice\", password=\"TestPassword123\")".to_owned(),
            "AUTH_TOKEN=${AUTH_TOKEN:-devtoken123456ABC}".to_owned(),
            "password: $(DbPassword)".to_owned(),
            "password: <%= ENV['DB_PASSWORD'] %>".to_owned(),
            "password: ************".to_owned(),
            "echo \"$CR_PAT\" | docker login ghcr.io -u USERNAME --password-stdin".to_owned(),
            "assert user.password == \"pbkdf2_sha256$600000$abc$def\"".to_owned(),
            "password: \"The admin password for the demo stack, 12 characters\"".to_owned(),
            "Password: Use at least 12 characters, e.g. a passphrase".to_owned(),
            "PASSWORD_FILE=/run/secrets/db_password".to_owned(),
            "postgres://user:password@localhost:5432/db".to_owned(),
            "DATABASE_URL=postgresql://postgres:postgres@localhost:5432/app_test".to_owned(),
            "mysql://root:<password>@127.0.0.1/app".to_owned(),
            "https://cdn.jsdelivr.net/npm/@fontsource/inter@5.0.8/index.css".to_owned(),
            "Authorization: Bearer $TOKEN".to_owned(),
            "The basic usage is shown below.".to_owned(),
            // Outside review 141: a header named in prose before a public key, placeholders
            // shaped like tokens, published examples, sealed ciphertext.
            "Keys start with `-----BEGIN PRIVATE KEY-----`.\n\n-----BEGIN PUBLIC KEY-----\nMIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gunVTLw7onLRnrq0/IzW7yWR7QkrmBL7jTKEn5u+qKhbwKfBstIs+bMY2Zkp18gnTxKLxoS2tFczGkPLPgizskuemMghRniWaoLcyehkd3qqGElvW/VDL5AaWTg0nLVkjRo9z+40RQzuVaE8AkAFmxZzow3x\n-----END PUBLIC KEY-----\n".to_owned(),
            "GITHUB_TOKEN=ghp_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx".to_owned(),
            "aws_access_key_id = AKIAXXXXXXXXXXXXXXXX".to_owned(),
            "https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX".to_owned(),
            r#"{"access_token":"2YotnFZFEjr1zCsicMWpAA","refresh_token":"tGzv3JOkF0XG5Qx2TlKWIA"}"#.to_owned(),
            "  password: MWYyZDFlMmU2N2Rm".to_owned(),
            "  password: Y2hhbmdlbWU=".to_owned(),
            "Authorization: Basic czZCaGRSa3F0MzpnWDFmQmF0M2JW".to_owned(),
            "-H \"Authorization: Bearer eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9...\"".to_owned(),
            r#""nextPageToken": "CiAKGjBpNDd2Nmp2Zml2cXRwYjBpOXA""#.to_owned(),
            "signing_key = \"0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b\"".to_owned(),
            "spec:\n  encryptedData:\n    password: AgBy3i4OJSWK+PiTySYZZA9rO43cGDEq7Zh8Kg3pL5mN1qR9sT2uV4wX6yZ8".to_owned(),
            "Atlas: `mongodb+srv://<username>:<password>@cluster0.abcde.mongodb.net/app?retryWrites=true&w=majority`"
                .to_owned(),
            // Prefixes glued to a word that ends in them are not tokens (outside review 167 F1
            // read glued tokens; these words stay words).
            "run task-abcdefghijklmnopqrstuvwxyzabcdefghijklmnop now".to_owned(),
            "def work_test_verifies_the_schema_and_more_stuff():".to_owned(),
            "laughs_at_the_very_long_identifier_names_here_and_there".to_owned(),
            "see report.pdf_abcdefghijklmnopqrstuvwxyz0123".to_owned(),
        ] {
            assert_eq!(secret_in(no.as_bytes()), None, "{no:?}");
        }
    }

    /// Values in string literals with a prefix or three quotes, PHP and Perl variables, R's
    /// `<-` are read (outside review 169 F1); a regex constant named `*_PAT`, a call, a word
    /// after a key with no operator between are not secrets (169 F2).
    #[test]
    fn literals_and_language_forms_are_read_and_names_are_not() {
        const V: &str = "Xk9Lp4WzQr7Tm2VnB8cD";
        for yes in [
            format!("app.secret_key = b'{V}'"),
            format!("SECRET_KEY = r\"{V}\""),
            format!("API_TOKEN = '''{V}'''"),
            format!("password = f\"{V}\""),
            format!("$password = '{V}';"),
            format!("my $PASSWORD='{V}'"),
            format!("var password = @\"{V}\";"),
            format!("password <- \"{V}\""),
            format!("GITHUB_PAT={V}"),
            format!("ENV API_TOKEN {V}"),
        ] {
            assert!(secret_in(yes.as_bytes()).is_some(), "{yes:?}");
        }
        for no in [
            "HEX_PAT = \"[0-9A-Fa-f]{1,4}\"",
            "auth = ApiGatewayV2WSAuthorizer(auth_name, self.api)",
            "https://play.rust-lang.org/?code=Let+some+time+pass+for+the+thread+Worker2Thread",
            "- Rotate the API token\n- Update2FASettingsPage in the console",
            "Description: run update-passwd.\nExtended_description-de.utf-8: Sie",
            "echo \"$PASSWORD\" | docker login -u x --password-stdin",
        ] {
            assert_eq!(secret_in(no.as_bytes()), None, "{no:?}");
        }
    }

    /// A token glued to the column before it, as SQLite packs a row, or written as UTF-16
    /// (a PDF's string, a file PowerShell wrote) is read (outside review 167 F1).
    #[test]
    fn glued_and_utf16_tokens_are_read() {
        const GH: &str = "ghp_u8jzPde0IgxLd6GncfBAepfJBd0Kh8oOOL8d";
        let mut row = b"\x0d\x00\x00\x00\x01\x00\x17!]github.com".to_vec();
        row.extend_from_slice(GH.as_bytes());
        for glued in [
            row,
            format!("id7{GH}").into_bytes(),
            b"xAKIA2E0A8F3B244C9986".to_vec(),
            b"xsk-ant-api03-Zk3vQ9pLx7WmB2nR8tYc4HdF6gJs1aE5uV0o".to_vec(),
        ] {
            assert!(secret_in(&glued).is_some(), "{:?}", String::from_utf8_lossy(&glued));
        }
        let text = format!("GITHUB_TOKEN={GH}\r\n");
        let le: Vec<u8> = text.encode_utf16().flat_map(u16::to_le_bytes).collect();
        let be: Vec<u8> =
            [0xFE, 0xFF].into_iter().chain(text.encode_utf16().flat_map(u16::to_be_bytes)).collect();
        for wide in [le, be] {
            let found = secret_in(&wide).unwrap();
            assert!(found.contains("GitHub token") && found.ends_with("in UTF-16"), "{found}");
        }
    }

    /// A file of repeated matches is refused or passed as the same text without them would
    /// be: each look after a match is bounded (outside review 167 F2 — what it cost is
    /// measured, not asserted here: docs/performance.md), and the bound cuts no real secret.
    #[test]
    fn repeated_matches_are_read_in_windows() {
        for (piece, secret) in [
            ("-----BEGIN PRIVATE KEY-----\n", false),
            ("eyJ", false),
            ("ghp_", false),
            ("sk-", false),
            ("password=", false),
            ("AKIA", false),
            ("eyJhbGciOi.", true),
            ("mnemonic: ", false),
            ("seed phrase ", false),
            ("[1,2,", false),
            ("[", false),
        ] {
            let text = piece.repeat(20_000);
            assert_eq!(secret_in(text.as_bytes()).is_some(), secret, "{piece:?}");
        }
        // A long armored key (RSA 8192: about 6.4 KB of body) after many headers quoted in prose.
        let body = "MIIJQgIBADANBgkqhkiG9w0BAQEFAASCCSwwggkoAgEAAoICAQ".repeat(130);
        let prose = "Look for `-----BEGIN PRIVATE KEY-----` lines.\n".repeat(50);
        let pem = format!("{prose}-----BEGIN PRIVATE KEY-----\n{body}\n-----END PRIVATE KEY-----\n");
        assert!(secret_in(pem.as_bytes()).unwrap().starts_with("an armored private key"));
        // A token inside a long run of `eyJ` pieces: its last three parts.
        let jwt = format!(
            "{}.eyJzdWIiOiIxMjM0NTY3ODkwIn0.SflKxwRJSMeKKF2QT4fwpMeJf36POk6y",
            "eyJhbGciOi".repeat(500)
        );
        assert!(secret_in(jwt.as_bytes()).is_some());
    }
}
