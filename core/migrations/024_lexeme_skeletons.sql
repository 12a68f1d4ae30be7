-- A name's lexemes in the other script, for the full-text leg: "Petrozavodsk" in an English question
-- finds the Russian pages' "петрозаводск", which no dictionary holds. Both are read by their consonants
-- after transliteration, exactly as core/text/skeletons.py `skeleton` reads a lower-case word (the test
-- suite checks the two agree): the Russian letters in Latin ones (core/text/script.py LATIN_SPELLING),
-- then ph -> f, w -> v, c and q -> k, x -> ks, the vowels and j, h dropped, a doubled letter once.
-- Lexemes are lower case already (the text search parser folds them), so the function does not fold.
CREATE FUNCTION lexeme_skeleton(lexeme text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $fn$
SELECT regexp_replace(regexp_replace(
    replace(replace(replace(replace(replace(
        replace(replace(replace(replace(replace(replace(
            translate(lexeme, 'абвгдеёзийклмнопрстуфхцыэъь', 'abvgdeezijklmnoprstufhcye'),
            'ж', 'zh'), 'ч', 'ch'), 'щ', 'shch'), 'ш', 'sh'), 'ю', 'yu'), 'я', 'ya'),
        'ph', 'f'), 'w', 'v'), 'c', 'k'), 'q', 'k'), 'x', 'ks'),
    '[aeiouyjh]', '', 'g'),
    '(.)\1+', '\1', 'g')
$fn$;

CREATE INDEX fulltext_lexeme_stats_skeleton ON fulltext_lexeme_stats (tenant_id, lexeme_skeleton(lexeme));
