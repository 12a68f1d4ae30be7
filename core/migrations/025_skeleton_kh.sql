-- A Latin "kh" is read as the Russian "х" it spells before transliterating, as core/text/skeletons.py
-- `skeleton` now reads it: "arkhangelsk" and "архангельск" share "rnglsk", "kazakhstan" and "казахстан"
-- "kzstn" (before, the Latin spelling kept its "k" and the two met only through a second reading of the
-- question's word). Only Latin lexemes hold "kh": a Russian "кх" is translated after the replacement.
-- The function is the expression of an index, so the index is rebuilt with it.
CREATE OR REPLACE FUNCTION lexeme_skeleton(lexeme text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $fn$
SELECT regexp_replace(regexp_replace(
    replace(replace(replace(replace(replace(
        replace(replace(replace(replace(replace(replace(
            translate(replace(lexeme, 'kh', 'h'), 'абвгдеёзийклмнопрстуфхцыэъь', 'abvgdeezijklmnoprstufhcye'),
            'ж', 'zh'), 'ч', 'ch'), 'щ', 'shch'), 'ш', 'sh'), 'ю', 'yu'), 'я', 'ya'),
        'ph', 'f'), 'w', 'v'), 'c', 'k'), 'q', 'k'), 'x', 'ks'),
    '[aeiouyjh]', '', 'g'),
    '(.)\1+', '\1', 'g')
$fn$;

REINDEX INDEX fulltext_lexeme_stats_skeleton;
