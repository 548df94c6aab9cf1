//! Where the candidate's Markdown holds code. The scanner is the crate's one
//! ([`crate::code_region`]): Layer A asks the same question of a completion's text.

pub(crate) use crate::code_region::code_regions;
