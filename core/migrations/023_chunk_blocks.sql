-- A chunk's reading blocks (core/text/markdown.py reading_blocks): the spans of its paragraphs, list
-- items and table rows with their header row, as [[start, end, header_start, header_end], ...] in
-- characters of `content`. Read once at ingest so the answer side never parses Markdown again; NULL for
-- a chunk written before this migration, which the answer side reads from its text with the same reader
-- (re-ingesting a changed document writes them).
ALTER TABLE chunks ADD COLUMN blocks jsonb;
