//! The projection's tables: named character references, format characters, confusables.

/// The named references a model is likely to write (HTML5 names are case-sensitive; the
/// legacy upper-case forms of the four basic ones are valid HTML5 too).
pub(super) const NAMED: &[(&str, char)] = &[
    ("lt", '<'),
    ("gt", '>'),
    ("amp", '&'),
    ("quot", '"'),
    ("LT", '<'),
    ("GT", '>'),
    ("AMP", '&'),
    ("QUOT", '"'),
    ("apos", '\''),
    ("nbsp", '\u{A0}'),
    ("ensp", '\u{2002}'),
    ("emsp", '\u{2003}'),
    ("thinsp", '\u{2009}'),
    ("zwsp", '\u{200B}'),
    ("zwj", '\u{200D}'),
    ("zwnj", '\u{200C}'),
    ("shy", '\u{AD}'),
    ("Tab", '\t'),
    ("NewLine", '\n'),
    ("lsquo", '\u{2018}'),
    ("rsquo", '\u{2019}'),
    ("ldquo", '\u{201C}'),
    ("rdquo", '\u{201D}'),
    ("ndash", '\u{2013}'),
    ("mdash", '\u{2014}'),
    ("hellip", '\u{2026}'),
    ("lpar", '('),
    ("rpar", ')'),
    ("lsqb", '['),
    ("rsqb", ']'),
    ("lbrack", '['),
    ("rbrack", ']'),
    ("lcub", '{'),
    ("rcub", '}'),
    ("lbrace", '{'),
    ("rbrace", '}'),
    ("colon", ':'),
    ("semi", ';'),
    ("comma", ','),
    ("period", '.'),
    ("excl", '!'),
    ("quest", '?'),
    ("sol", '/'),
    ("bsol", '\\'),
    ("ast", '*'),
    ("midast", '*'),
    ("lowbar", '_'),
    ("UnderBar", '_'),
    ("grave", '`'),
    ("num", '#'),
    ("percnt", '%'),
    ("dollar", '$'),
    ("commat", '@'),
    ("equals", '='),
    ("plus", '+'),
    ("hyphen", '\u{2010}'),
    ("dash", '\u{2010}'),
    ("verbar", '|'),
    ("vert", '|'),
    ("Hat", '^'),
    ("tilde", '\u{2DC}'),
    ("copy", '\u{A9}'),
    ("reg", '\u{AE}'),
    ("trade", '\u{2122}'),
];

/// Format characters a person does not see: general category Cf, plus variation selectors and
/// the combining grapheme joiner (Mn, but invisible on their own).
pub(super) fn is_format(c: char) -> bool {
    matches!(
        c,
        '\u{AD}'
            | '\u{600}'..='\u{605}'
            | '\u{61C}'
            | '\u{6DD}'
            | '\u{70F}'
            | '\u{34F}'
            | '\u{180E}'
            | '\u{200B}'..='\u{200F}'
            | '\u{202A}'..='\u{202E}'
            | '\u{2060}'..='\u{2064}'
            | '\u{2066}'..='\u{206F}'
            | '\u{FE00}'..='\u{FE0F}'
            | '\u{FEFF}'
            | '\u{FFF9}'..='\u{FFFB}'
            | '\u{110BD}'
            | '\u{1BCA0}'..='\u{1BCA3}'
            | '\u{1D173}'..='\u{1D17A}'
            | '\u{E0001}'
            | '\u{E0020}'..='\u{E007F}'
            | '\u{E0100}'..='\u{E01EF}'
    )
}

/// The Latin letter a lowercase Cyrillic or Greek letter is drawn like (Unicode's
/// confusables.txt, the single-letter entries whose prototype is a Latin letter).
pub(super) fn confusable(c: char) -> Option<char> {
    Some(match c {
        // Cyrillic
        'а' => 'a',
        'в' => 'b',
        'с' => 'c',
        'ԁ' => 'd',
        'е' => 'e',
        'һ' => 'h',
        'і' => 'i',
        'ј' => 'j',
        'к' => 'k',
        'ӏ' => 'l',
        'м' => 'm',
        'н' => 'h',
        'о' => 'o',
        'р' => 'p',
        'ԛ' => 'q',
        'г' => 'r',
        'ѕ' => 's',
        'т' => 't',
        'ս' => 'u',
        'ѵ' => 'v',
        'ԝ' => 'w',
        'х' => 'x',
        'у' => 'y',
        'ү' => 'y',
        // Greek
        'α' => 'a',
        'β' => 'b',
        'ε' => 'e',
        'η' => 'n',
        'ι' => 'i',
        'κ' => 'k',
        'ν' => 'v',
        'ο' => 'o',
        'ρ' => 'p',
        'τ' => 't',
        'υ' => 'u',
        'χ' => 'x',
        'γ' => 'y',
        _ => return None,
    })
}
