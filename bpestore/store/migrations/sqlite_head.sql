-- A new SQLite store at the head revision: what the migrations in versions/ create, as SQLite
-- keeps it (bpestore/store/migrate.py, sqlite_head_text). Generated, never edited by hand; a test
-- checks that it matches the migrations.

CREATE TABLE alembic_version (
	version_num VARCHAR(32) NOT NULL, 
	CONSTRAINT alembic_version_pkc PRIMARY KEY (version_num)
);

CREATE TABLE corpora (
	id INTEGER NOT NULL,
	sha256 TEXT NOT NULL,
	pattern TEXT NOT NULL,
	special_tokens TEXT NOT NULL CONSTRAINT ck_corpora_special_tokens_json_array CHECK (CASE WHEN json_valid(special_tokens) THEN json_type(special_tokens) = 'array' ELSE 0 END),
	path TEXT NOT NULL,
	size_bytes INTEGER NOT NULL,
	distinct_pretokens INTEGER NOT NULL,
	total_pretokens INTEGER NOT NULL,
	created_at TEXT NOT NULL CONSTRAINT ck_corpora_created_at_moment CHECK (created_at GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]*'),
	origin TEXT DEFAULT 'files' NOT NULL,
	CONSTRAINT pk_corpora PRIMARY KEY (id),
	CONSTRAINT uq_corpora_sha256 UNIQUE (sha256, pattern, special_tokens)
) STRICT;

CREATE TABLE pretoken_counts (
	corpus_id INTEGER NOT NULL,
	pretoken BLOB NOT NULL,
	count INTEGER NOT NULL,
	CONSTRAINT pk_pretoken_counts PRIMARY KEY (corpus_id, pretoken),
	CONSTRAINT fk_pretoken_counts_corpus_id_corpora FOREIGN KEY(corpus_id) REFERENCES corpora (id) ON DELETE CASCADE
) WITHOUT ROWID, STRICT;

CREATE TABLE packed_counts (
	corpus_id INTEGER NOT NULL,
	part INTEGER NOT NULL,
	data BLOB NOT NULL,
	CONSTRAINT pk_packed_counts PRIMARY KEY (corpus_id, part),
	CONSTRAINT fk_packed_counts_corpus_id_corpora FOREIGN KEY(corpus_id) REFERENCES corpora (id) ON DELETE CASCADE
) STRICT;

CREATE TABLE corpus_files (
	corpus_id INTEGER NOT NULL,
	position INTEGER NOT NULL,
	path TEXT NOT NULL,
	sha256 TEXT NOT NULL,
	size_bytes INTEGER NOT NULL,
	added_at TEXT NOT NULL CONSTRAINT ck_corpus_files_added_at_moment CHECK (added_at GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]*'),
	CONSTRAINT pk_corpus_files PRIMARY KEY (corpus_id, position),
	CONSTRAINT fk_corpus_files_corpus_id_corpora FOREIGN KEY(corpus_id) REFERENCES corpora (id) ON DELETE CASCADE
) STRICT;

CREATE TABLE tokenizers (
	id INTEGER NOT NULL,
	name TEXT NOT NULL,
	version INTEGER NOT NULL,
	created_at TEXT NOT NULL CONSTRAINT ck_tokenizers_created_at_moment CHECK (created_at GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]*'),
	vocab_size INTEGER NOT NULL,
	pattern TEXT NOT NULL,
	special_tokens TEXT NOT NULL CONSTRAINT ck_tokenizers_special_tokens_json_array CHECK (CASE WHEN json_valid(special_tokens) THEN json_type(special_tokens) = 'array' ELSE 0 END),
	merge_rule TEXT NOT NULL,
	corpus_id INTEGER,
	training_params TEXT CONSTRAINT ck_tokenizers_training_params_json_object CHECK (training_params IS NULL OR CASE WHEN json_valid(training_params) THEN json_type(training_params) = 'object' ELSE 0 END),
	training_seconds REAL,
	source TEXT NOT NULL,
	source_format TEXT,
	source_paths TEXT CONSTRAINT ck_tokenizers_source_paths_json_array CHECK (source_paths IS NULL OR CASE WHEN json_valid(source_paths) THEN json_type(source_paths) = 'array' ELSE 0 END),
	added_tokens TEXT DEFAULT '[]' NOT NULL CONSTRAINT ck_tokenizers_added_tokens_json_array CHECK (CASE WHEN json_valid(added_tokens) THEN json_type(added_tokens) = 'array' ELSE 0 END),
	pipeline TEXT CONSTRAINT ck_tokenizers_pipeline_json_object CHECK (pipeline IS NULL OR CASE WHEN json_valid(pipeline) THEN json_type(pipeline) = 'object' ELSE 0 END),
	CONSTRAINT pk_tokenizers PRIMARY KEY (id),
	CONSTRAINT ck_tokenizers_merge_rule_known CHECK (merge_rule IN ('pair', 'token')),
	CONSTRAINT ck_tokenizers_version_positive CHECK (version >= 1),
	CONSTRAINT fk_tokenizers_corpus_id_corpora FOREIGN KEY(corpus_id) REFERENCES corpora (id) ON DELETE RESTRICT,
	CONSTRAINT uq_tokenizers_name UNIQUE (name, version)
) STRICT;

CREATE TABLE tokenizer_names (
	name TEXT NOT NULL,
	last_version INTEGER NOT NULL,
	CONSTRAINT pk_tokenizer_names PRIMARY KEY (name)
) STRICT;

CREATE TABLE vocab (
	tokenizer_id INTEGER NOT NULL,
	token_id INTEGER NOT NULL,
	token BLOB NOT NULL,
	kind TEXT NOT NULL,
	text TEXT NOT NULL,
	CONSTRAINT pk_vocab PRIMARY KEY (tokenizer_id, token_id),
	CONSTRAINT ck_vocab_kind_known CHECK (kind IN ('special', 'byte', 'merge', 'other')),
	CONSTRAINT fk_vocab_tokenizer_id_tokenizers FOREIGN KEY(tokenizer_id) REFERENCES tokenizers (id) ON DELETE CASCADE,
	CONSTRAINT uq_vocab_tokenizer_id UNIQUE (tokenizer_id, token)
) STRICT;

CREATE TABLE merges (
	tokenizer_id INTEGER NOT NULL,
	rank INTEGER NOT NULL,
	"left" BLOB NOT NULL,
	"right" BLOB NOT NULL,
	result_id INTEGER NOT NULL,
	CONSTRAINT pk_merges PRIMARY KEY (tokenizer_id, rank),
	CONSTRAINT fk_merges_result_vocab FOREIGN KEY(tokenizer_id, result_id) REFERENCES vocab (tokenizer_id, token_id) ON DELETE CASCADE,
	CONSTRAINT fk_merges_tokenizer_id_tokenizers FOREIGN KEY(tokenizer_id) REFERENCES tokenizers (id) ON DELETE CASCADE
) STRICT;

CREATE TABLE packed_models (
	tokenizer_id INTEGER NOT NULL,
	data BLOB NOT NULL,
	CONSTRAINT pk_packed_models PRIMARY KEY (tokenizer_id),
	CONSTRAINT fk_packed_models_tokenizer_id_tokenizers FOREIGN KEY(tokenizer_id) REFERENCES tokenizers (id) ON DELETE CASCADE
) STRICT;

CREATE TABLE warm_caches (
	tokenizer_id INTEGER NOT NULL,
	fingerprint TEXT NOT NULL,
	entries INTEGER NOT NULL,
	source TEXT NOT NULL,
	data BLOB NOT NULL,
	created_at TEXT NOT NULL CONSTRAINT ck_warm_caches_created_at_moment CHECK (created_at GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]*'),
	CONSTRAINT pk_warm_caches PRIMARY KEY (tokenizer_id),
	CONSTRAINT fk_warm_caches_tokenizer_id_tokenizers FOREIGN KEY(tokenizer_id) REFERENCES tokenizers (id) ON DELETE CASCADE
) STRICT;

CREATE TABLE evaluations (
	id INTEGER NOT NULL,
	tokenizer_id INTEGER NOT NULL,
	sha256 TEXT NOT NULL,
	label TEXT NOT NULL,
	path TEXT NOT NULL,
	alpha REAL NOT NULL,
	bytes INTEGER NOT NULL,
	characters INTEGER NOT NULL,
	words INTEGER NOT NULL,
	tokens INTEGER NOT NULL,
	distinct_tokens INTEGER NOT NULL,
	single_token_words INTEGER NOT NULL,
	bytes_per_token REAL,
	characters_per_token REAL,
	fertility REAL,
	renyi_efficiency REAL,
	vocab_used REAL,
	single_token_word_rate REAL,
	created_at TEXT NOT NULL CONSTRAINT ck_evaluations_created_at_moment CHECK (created_at GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]*'),
	CONSTRAINT pk_evaluations PRIMARY KEY (id),
	CONSTRAINT fk_evaluations_tokenizer_id_tokenizers FOREIGN KEY(tokenizer_id) REFERENCES tokenizers (id) ON DELETE CASCADE,
	CONSTRAINT uq_evaluations_tokenizer_id UNIQUE (tokenizer_id, sha256, alpha)
) STRICT;

CREATE INDEX ix_merges_tokenizer_id_result_id ON merges (tokenizer_id, result_id);

CREATE INDEX ix_tokenizers_corpus_id ON tokenizers (corpus_id);

CREATE TRIGGER vocab_insert_unpacks AFTER INSERT ON vocab FOR EACH ROW BEGIN DELETE FROM packed_models WHERE tokenizer_id IN (NEW.tokenizer_id); END;

CREATE TRIGGER vocab_update_unpacks AFTER UPDATE ON vocab FOR EACH ROW BEGIN DELETE FROM packed_models WHERE tokenizer_id IN (OLD.tokenizer_id, NEW.tokenizer_id); END;

CREATE TRIGGER vocab_delete_unpacks AFTER DELETE ON vocab FOR EACH ROW BEGIN DELETE FROM packed_models WHERE tokenizer_id IN (OLD.tokenizer_id); END;

CREATE TRIGGER merges_insert_unpacks AFTER INSERT ON merges FOR EACH ROW BEGIN DELETE FROM packed_models WHERE tokenizer_id IN (NEW.tokenizer_id); END;

CREATE TRIGGER merges_update_unpacks AFTER UPDATE ON merges FOR EACH ROW BEGIN DELETE FROM packed_models WHERE tokenizer_id IN (OLD.tokenizer_id, NEW.tokenizer_id); END;

CREATE TRIGGER merges_delete_unpacks AFTER DELETE ON merges FOR EACH ROW BEGIN DELETE FROM packed_models WHERE tokenizer_id IN (OLD.tokenizer_id); END;

CREATE TRIGGER pretoken_counts_insert_unpacks AFTER INSERT ON pretoken_counts FOR EACH ROW WHEN EXISTS (SELECT 1 FROM packed_counts WHERE corpus_id IN (NEW.corpus_id)) BEGIN DELETE FROM packed_counts WHERE corpus_id IN (NEW.corpus_id); END;

CREATE TRIGGER pretoken_counts_update_unpacks AFTER UPDATE ON pretoken_counts FOR EACH ROW WHEN EXISTS (SELECT 1 FROM packed_counts WHERE corpus_id IN (OLD.corpus_id, NEW.corpus_id)) BEGIN DELETE FROM packed_counts WHERE corpus_id IN (OLD.corpus_id, NEW.corpus_id); END;

CREATE TRIGGER pretoken_counts_delete_unpacks AFTER DELETE ON pretoken_counts FOR EACH ROW WHEN EXISTS (SELECT 1 FROM packed_counts WHERE corpus_id IN (OLD.corpus_id)) BEGIN DELETE FROM packed_counts WHERE corpus_id IN (OLD.corpus_id); END;

CREATE VIEW vocab_readable AS
            SELECT t.name, t.version, v.token_id AS id, v.kind, v.text AS token, hex(v.token) AS token_hex
            FROM vocab v JOIN tokenizers t ON t.id = v.tokenizer_id;

CREATE VIEW merges_readable AS
            SELECT t.name, t.version, m.rank, l.text AS "left", r.text AS "right", res.text AS result,
                   m.result_id
            FROM merges m
            JOIN tokenizers t ON t.id = m.tokenizer_id
            JOIN vocab l ON l.tokenizer_id = m.tokenizer_id AND l.token = m."left"
            JOIN vocab r ON r.tokenizer_id = m.tokenizer_id AND r.token = m."right"
            JOIN vocab res ON res.tokenizer_id = m.tokenizer_id AND res.token_id = m.result_id;

CREATE TRIGGER corpora_special_tokens_insert_strings BEFORE INSERT ON corpora FOR EACH ROW WHEN CASE WHEN json_valid(NEW.special_tokens) THEN EXISTS (SELECT 1 FROM json_each(NEW.special_tokens) WHERE json_type(NEW.special_tokens) = 'array' AND type <> 'text') ELSE 0 END BEGIN SELECT RAISE(ABORT, 'corpora.special_tokens must be a JSON array of strings'); END;

CREATE TRIGGER corpora_special_tokens_update_strings BEFORE UPDATE OF special_tokens ON corpora FOR EACH ROW WHEN CASE WHEN json_valid(NEW.special_tokens) THEN EXISTS (SELECT 1 FROM json_each(NEW.special_tokens) WHERE json_type(NEW.special_tokens) = 'array' AND type <> 'text') ELSE 0 END BEGIN SELECT RAISE(ABORT, 'corpora.special_tokens must be a JSON array of strings'); END;

CREATE TRIGGER tokenizers_special_tokens_insert_strings BEFORE INSERT ON tokenizers FOR EACH ROW WHEN CASE WHEN json_valid(NEW.special_tokens) THEN EXISTS (SELECT 1 FROM json_each(NEW.special_tokens) WHERE json_type(NEW.special_tokens) = 'array' AND type <> 'text') ELSE 0 END BEGIN SELECT RAISE(ABORT, 'tokenizers.special_tokens must be a JSON array of strings'); END;

CREATE TRIGGER tokenizers_special_tokens_update_strings BEFORE UPDATE OF special_tokens ON tokenizers FOR EACH ROW WHEN CASE WHEN json_valid(NEW.special_tokens) THEN EXISTS (SELECT 1 FROM json_each(NEW.special_tokens) WHERE json_type(NEW.special_tokens) = 'array' AND type <> 'text') ELSE 0 END BEGIN SELECT RAISE(ABORT, 'tokenizers.special_tokens must be a JSON array of strings'); END;

CREATE TRIGGER tokenizers_source_paths_insert_strings BEFORE INSERT ON tokenizers FOR EACH ROW WHEN CASE WHEN json_valid(NEW.source_paths) THEN EXISTS (SELECT 1 FROM json_each(NEW.source_paths) WHERE json_type(NEW.source_paths) = 'array' AND type <> 'text') ELSE 0 END BEGIN SELECT RAISE(ABORT, 'tokenizers.source_paths must be a JSON array of strings'); END;

CREATE TRIGGER tokenizers_source_paths_update_strings BEFORE UPDATE OF source_paths ON tokenizers FOR EACH ROW WHEN CASE WHEN json_valid(NEW.source_paths) THEN EXISTS (SELECT 1 FROM json_each(NEW.source_paths) WHERE json_type(NEW.source_paths) = 'array' AND type <> 'text') ELSE 0 END BEGIN SELECT RAISE(ABORT, 'tokenizers.source_paths must be a JSON array of strings'); END;

CREATE TRIGGER tokenizers_added_tokens_insert_strings BEFORE INSERT ON tokenizers FOR EACH ROW WHEN CASE WHEN json_valid(NEW.added_tokens) THEN EXISTS (SELECT 1 FROM json_each(NEW.added_tokens) WHERE json_type(NEW.added_tokens) = 'array' AND type <> 'text') ELSE 0 END BEGIN SELECT RAISE(ABORT, 'tokenizers.added_tokens must be a JSON array of strings'); END;

CREATE TRIGGER tokenizers_added_tokens_update_strings BEFORE UPDATE OF added_tokens ON tokenizers FOR EACH ROW WHEN CASE WHEN json_valid(NEW.added_tokens) THEN EXISTS (SELECT 1 FROM json_each(NEW.added_tokens) WHERE json_type(NEW.added_tokens) = 'array' AND type <> 'text') ELSE 0 END BEGIN SELECT RAISE(ABORT, 'tokenizers.added_tokens must be a JSON array of strings'); END;

INSERT INTO alembic_version (version_num) VALUES ('0013');
