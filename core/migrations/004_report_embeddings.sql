-- A vector of each community report's title and summary, for selecting reports relevant to a
-- question in global search (offline scoring and the dynamic community selection).
ALTER TABLE community_reports ADD COLUMN embedding vector, ADD COLUMN embed_model text;
