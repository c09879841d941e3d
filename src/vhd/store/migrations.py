"""Schema of the vhd store as an ordered list of named migrations.

Each migration is a ``(name, sql)`` pair. `apply_migrations` runs the ones a database has not
seen yet, in order, all inside one transaction (a concurrent opener sees the old schema or the new
one, never half), and records each in the ``migrations`` table. Before it changes an existing
store it writes a consistent copy of it next to it, ``STORE.bak-<schema version>``. Never edit
or reorder a released migration: append a new one instead. A database that records a migration
this version does not know was written by a newer vhd and is refused.

The module is long (about 600 lines) because it holds every schema change since the first, as
the literal SQL that ran, triggers included; splitting that history would only scatter it.
"""

from __future__ import annotations

import os
import sqlite3
import time
from contextlib import suppress
from pathlib import Path

from vhd.errors import ConfigError, VhdError

NEWEST = ""
"""The ``gallery_configs`` hash of the pseudo-configuration "each sample's newest verdict"."""


def _facets_of(cond: str) -> str:
    """The gallery facets of the annotations ``x`` that satisfy ``cond`` (as one column ``facet``)."""
    return (
        f"SELECT 's:' || x.status AS facet FROM annotations x WHERE {cond} "
        "UNION SELECT 'd:' || CASE x.harmful WHEN 1 THEN 'harmful' WHEN 0 THEN 'not_harmful' ELSE 'none' END "
        f"FROM annotations x WHERE {cond} "
        f"UNION SELECT 'b:' || x.decided_by FROM annotations x WHERE {cond} AND x.decided_by IS NOT NULL "
        "UNION SELECT 'c:' || j.value FROM annotations x, "
        f"json_each(IIF(json_valid(x.categories_json), x.categories_json, '[]')) j WHERE {cond}"
    )


_OLD_FACETS = (
    " UNION SELECT 's:' || OLD.status UNION SELECT 'd:' || CASE OLD.harmful WHEN 1 THEN 'harmful' "
    "WHEN 0 THEN 'not_harmful' ELSE 'none' END UNION SELECT 'b:' || OLD.decided_by WHERE OLD.decided_by IS NOT NULL "
    "UNION SELECT 'c:' || value FROM json_each(IIF(json_valid(OLD.categories_json), OLD.categories_json, '[]'))"
)


def _newest_refresh(sample: str, old: bool) -> str:
    """Trigger statements that set the newest-verdict index of one sample from its newest annotation.

    The sample's rows are deleted by their exact keys (every facet and score any of its annotations,
    and ``OLD`` when ``old``, can have), so each statement is a few primary-key look-ups.
    """
    newest = f"x.id = (SELECT MAX(id) FROM annotations WHERE sample_id = {sample})"
    config = "(SELECT id FROM gallery_configs WHERE config_hash = '')"
    rowid = f"(SELECT rowid FROM samples WHERE id = {sample})"
    old_score = " UNION SELECT OLD.score" if old else ""
    return f"""
            DELETE FROM gallery_facets WHERE config = {config} AND sample = {rowid}
                AND facet IN ({_facets_of(f"x.sample_id = {sample}")}{_OLD_FACETS if old else ""});
            DELETE FROM gallery_scores WHERE config = {config} AND sample = {rowid}
                AND score IN (SELECT score FROM annotations WHERE sample_id = {sample}{old_score});
            INSERT OR IGNORE INTO gallery_facets (config, facet, sample)
                SELECT c.id, f.facet, s.rowid FROM gallery_configs c, samples s, ({_facets_of(newest)}) f
                WHERE c.config_hash = '' AND s.id = {sample};
            INSERT OR IGNORE INTO gallery_scores (config, score, sample)
                SELECT c.id, x.score, s.rowid FROM gallery_configs c, samples s, annotations x
                WHERE c.config_hash = '' AND s.id = {sample} AND {newest} AND x.score IS NOT NULL;"""


def _newest_block(sample: str, step: int) -> str:
    """A trigger statement that counts a sample in (1) or out of (-1) the blocks of annotated samples."""
    if step > 0:
        return f"""
            INSERT INTO gallery_blocks (kind, key, block, n)
                SELECT 'a', '', s.rowid >> 8, 1 FROM samples s WHERE s.id = {sample}
                ON CONFLICT (kind, key, block) DO UPDATE SET n = n + 1;"""
    return f"""
            UPDATE gallery_blocks SET n = n - 1 WHERE kind = 'a' AND key = ''
                AND block = (SELECT rowid >> 8 FROM samples WHERE id = {sample});"""


_NEWEST_ROWS = (
    "(SELECT MAX(id) AS id FROM annotations GROUP BY sample_id) m JOIN annotations a ON a.id = m.id "
    "JOIN samples s ON s.id = a.sample_id JOIN gallery_configs c ON c.config_hash = ''"
)
_IS_NEWEST = "(SELECT MAX(id) FROM annotations WHERE sample_id = {0}.sample_id)"
_GALLERY_NEWEST = f"""
        INSERT OR IGNORE INTO gallery_configs (config_hash) VALUES ('');
        INSERT OR IGNORE INTO gallery_facets (config, facet, sample)
            SELECT c.id, 's:' || a.status, s.rowid FROM {_NEWEST_ROWS};
        INSERT OR IGNORE INTO gallery_facets (config, facet, sample)
            SELECT c.id, 'd:' || CASE a.harmful WHEN 1 THEN 'harmful' WHEN 0 THEN 'not_harmful' ELSE 'none' END,
            s.rowid FROM {_NEWEST_ROWS};
        INSERT OR IGNORE INTO gallery_facets (config, facet, sample)
            SELECT c.id, 'b:' || a.decided_by, s.rowid FROM {_NEWEST_ROWS}
            WHERE a.decided_by IS NOT NULL;
        INSERT OR IGNORE INTO gallery_facets (config, facet, sample)
            SELECT c.id, 'c:' || j.value, s.rowid FROM {_NEWEST_ROWS},
            json_each(IIF(json_valid(a.categories_json), a.categories_json, '[]')) j;
        INSERT OR IGNORE INTO gallery_scores (config, score, sample)
            SELECT c.id, a.score, s.rowid FROM {_NEWEST_ROWS}
            WHERE a.score IS NOT NULL;
        INSERT INTO gallery_blocks (kind, key, block, n)
            SELECT 'a', '', s.rowid >> 8, COUNT(*) FROM samples s
            WHERE EXISTS (SELECT 1 FROM annotations a WHERE a.sample_id = s.id) GROUP BY s.rowid >> 8;

        CREATE TRIGGER gallery_newest_insert AFTER INSERT ON annotations
        WHEN NEW.id = {_IS_NEWEST.format("NEW")}
        BEGIN{_newest_refresh("NEW.sample_id", old=False)}
        END;
        CREATE TRIGGER gallery_newest_first AFTER INSERT ON annotations
        WHEN (SELECT COUNT(*) FROM annotations WHERE sample_id = NEW.sample_id) = 1
        BEGIN{_newest_block("NEW.sample_id", 1)}
        END;
        CREATE TRIGGER gallery_newest_delete AFTER DELETE ON annotations
        WHEN OLD.id > IFNULL({_IS_NEWEST.format("OLD")}, -1)
        BEGIN{_newest_refresh("OLD.sample_id", old=True)}
        END;
        CREATE TRIGGER gallery_newest_last AFTER DELETE ON annotations
        WHEN NOT EXISTS (SELECT 1 FROM annotations WHERE sample_id = OLD.sample_id)
        BEGIN{_newest_block("OLD.sample_id", -1)}
        END;
        CREATE TRIGGER gallery_newest_update
        AFTER UPDATE OF id, status, harmful, decided_by, categories_json, score ON annotations
        WHEN OLD.sample_id = NEW.sample_id
            AND (NEW.id = {_IS_NEWEST.format("NEW")} OR OLD.id > {_IS_NEWEST.format("NEW")})
        BEGIN{_newest_refresh("NEW.sample_id", old=True)}
        END;
        CREATE TRIGGER gallery_newest_move AFTER UPDATE OF sample_id ON annotations
        WHEN OLD.sample_id != NEW.sample_id
        BEGIN{_newest_refresh("OLD.sample_id", old=True)}{_newest_refresh("NEW.sample_id", old=False)}
        END;
        CREATE TRIGGER gallery_newest_move_out AFTER UPDATE OF sample_id ON annotations
        WHEN OLD.sample_id != NEW.sample_id AND NOT EXISTS (SELECT 1 FROM annotations WHERE sample_id = OLD.sample_id)
        BEGIN{_newest_block("OLD.sample_id", -1)}
        END;
        CREATE TRIGGER gallery_newest_move_in AFTER UPDATE OF sample_id ON annotations
        WHEN OLD.sample_id != NEW.sample_id AND (SELECT COUNT(*) FROM annotations WHERE sample_id = NEW.sample_id) = 1
        BEGIN{_newest_block("NEW.sample_id", 1)}
        END;
"""


MIGRATIONS: list[tuple[str, str]] = [
    (
        "0001_initial",
        """
        CREATE TABLE runs (
            id TEXT PRIMARY KEY,
            config_json TEXT NOT NULL,
            config_hash TEXT NOT NULL,
            models_json TEXT NOT NULL,
            prompt_hash TEXT NOT NULL,
            vhd_version TEXT NOT NULL,
            command TEXT NOT NULL DEFAULT '',
            started_at REAL NOT NULL,
            finished_at REAL,
            summary_json TEXT
        );
        CREATE INDEX runs_config_hash ON runs (config_hash);

        CREATE TABLE samples (
            id TEXT PRIMARY KEY,
            kind TEXT NOT NULL CHECK (kind IN ('image', 'video')),
            path TEXT NOT NULL,
            source TEXT,
            keyword TEXT,
            generator TEXT,
            split TEXT,
            label INTEGER CHECK (label IN (0, 1)),
            frames_json TEXT NOT NULL DEFAULT '[]',
            meta_json TEXT NOT NULL DEFAULT '{}',
            removed_at REAL
        );
        CREATE INDEX samples_path ON samples (path);

        CREATE TABLE annotations (
            id INTEGER PRIMARY KEY,
            sample_id TEXT NOT NULL REFERENCES samples (id),
            run_id TEXT NOT NULL REFERENCES runs (id),
            config_hash TEXT NOT NULL,
            status TEXT NOT NULL CHECK (status IN ('ok', 'refused', 'unparsed', 'error')),
            harmful INTEGER CHECK (harmful IN (0, 1)),
            reason TEXT NOT NULL DEFAULT '',
            categories_json TEXT NOT NULL DEFAULT '[]',
            score REAL,
            refused INTEGER NOT NULL DEFAULT 0,
            prompt_tokens INTEGER NOT NULL DEFAULT 0,
            completion_tokens INTEGER NOT NULL DEFAULT 0,
            calls INTEGER NOT NULL DEFAULT 0,
            cost REAL NOT NULL DEFAULT 0,
            error TEXT,
            started_at REAL,
            finished_at REAL,
            UNIQUE (sample_id, config_hash),
            CHECK (harmful IS NULL OR status IN ('ok', 'refused'))
        );
        CREATE INDEX annotations_config_status ON annotations (config_hash, status);
        CREATE INDEX annotations_run ON annotations (run_id);

        CREATE TABLE turns (
            annotation_id INTEGER NOT NULL REFERENCES annotations (id) ON DELETE CASCADE,
            idx INTEGER NOT NULL,
            role TEXT NOT NULL,
            round INTEGER NOT NULL,
            text TEXT NOT NULL,
            prompt_tokens INTEGER NOT NULL DEFAULT 0,
            completion_tokens INTEGER NOT NULL DEFAULT 0,
            latency_s REAL NOT NULL DEFAULT 0,
            refused INTEGER NOT NULL DEFAULT 0,
            model TEXT NOT NULL DEFAULT '',
            PRIMARY KEY (annotation_id, idx)
        );

        CREATE TABLE skips (
            id INTEGER PRIMARY KEY,
            run_id TEXT REFERENCES runs (id),
            path TEXT NOT NULL,
            reason TEXT NOT NULL,
            at REAL NOT NULL
        );
        CREATE INDEX skips_run ON skips (run_id);
        """,
    ),
    (
        "0002_categories",
        """
        CREATE TABLE categorizations (
            id INTEGER PRIMARY KEY,
            annotation_id INTEGER NOT NULL REFERENCES annotations (id) ON DELETE CASCADE,
            method TEXT NOT NULL,
            taxonomy TEXT NOT NULL,
            taxonomy_version TEXT NOT NULL,
            taxonomy_digest TEXT NOT NULL,
            model TEXT NOT NULL DEFAULT '',
            status TEXT NOT NULL CHECK (status IN ('ok', 'unparsed', 'error')),
            answer TEXT,
            error TEXT,
            params_json TEXT NOT NULL DEFAULT '{}',
            prompt_tokens INTEGER NOT NULL DEFAULT 0,
            completion_tokens INTEGER NOT NULL DEFAULT 0,
            created_at REAL NOT NULL,
            UNIQUE (annotation_id, method, taxonomy, taxonomy_version)
        );
        CREATE INDEX categorizations_key ON categorizations (method, taxonomy, taxonomy_version, status);

        CREATE TABLE category_assignments (
            categorization_id INTEGER NOT NULL REFERENCES categorizations (id) ON DELETE CASCADE,
            code TEXT NOT NULL,
            name TEXT NOT NULL,
            confidence REAL,
            PRIMARY KEY (categorization_id, code)
        );
        """,
    ),
    (
        "0003_curation",
        """
        CREATE TABLE duplicates (
            sample_id TEXT PRIMARY KEY REFERENCES samples (id),
            cluster TEXT NOT NULL,
            kept INTEGER NOT NULL CHECK (kept IN (0, 1)),
            match TEXT NOT NULL CHECK (match IN ('kept', 'exact', 'near')),
            distance INTEGER NOT NULL,
            threshold INTEGER NOT NULL,
            policy TEXT NOT NULL,
            marked_at REAL NOT NULL
        );
        CREATE INDEX duplicates_cluster ON duplicates (cluster);

        CREATE TABLE removals (
            id INTEGER PRIMARY KEY,
            sample_id TEXT NOT NULL,
            path TEXT NOT NULL,
            reason TEXT NOT NULL DEFAULT '',
            requested_by TEXT NOT NULL DEFAULT '',
            deleted_json TEXT NOT NULL DEFAULT '[]',
            at REAL NOT NULL
        );
        CREATE INDEX removals_sample ON removals (sample_id);

        CREATE TABLE quarantine (
            sha256 TEXT NOT NULL,
            path TEXT NOT NULL,
            reason TEXT NOT NULL,
            moved_to TEXT,
            at REAL NOT NULL,
            PRIMARY KEY (sha256, path)
        );
        """,
    ),
    (
        "0004_labelled_sets",
        """
        CREATE TABLE labelled_sets (
            name TEXT NOT NULL,
            sample_id TEXT NOT NULL REFERENCES samples (id),
            harmful INTEGER NOT NULL CHECK (harmful IN (0, 1)),
            reason TEXT,
            categories_json TEXT NOT NULL DEFAULT '[]',
            source_file TEXT NOT NULL DEFAULT '',
            imported_at REAL NOT NULL,
            PRIMARY KEY (name, sample_id)
        );
        CREATE INDEX labelled_sets_sample ON labelled_sets (sample_id);
        """,
    ),
    (
        "0005_leases",
        """
        CREATE TABLE leases (
            sample_id TEXT NOT NULL,
            config_hash TEXT NOT NULL,
            run_id TEXT NOT NULL,
            pid INTEGER NOT NULL,
            host TEXT NOT NULL,
            expires_at REAL NOT NULL,
            PRIMARY KEY (sample_id, config_hash)
        );
        CREATE INDEX leases_run ON leases (run_id);
        """,
    ),
    (
        "0006_run_usage",
        """
        CREATE TABLE run_usage (
            run_id TEXT PRIMARY KEY REFERENCES runs (id),
            calls INTEGER NOT NULL DEFAULT 0,
            prompt_tokens INTEGER NOT NULL DEFAULT 0,
            completion_tokens INTEGER NOT NULL DEFAULT 0,
            cost REAL NOT NULL DEFAULT 0,
            updated_at REAL NOT NULL
        );
        """,
    ),
    (
        "0007_stat_index",
        """
        CREATE TABLE stat_index (
            path TEXT PRIMARY KEY,
            size INTEGER NOT NULL,
            mtime_ns INTEGER NOT NULL,
            ctime_ns INTEGER NOT NULL,
            inode INTEGER NOT NULL,
            sha256 TEXT NOT NULL,
            hashed_at_ns INTEGER NOT NULL
        ) WITHOUT ROWID;
        CREATE INDEX samples_path_id ON samples (path, id);
        CREATE INDEX annotations_sample_run ON annotations (sample_id, run_id);
        """,
    ),
    (
        "0008_provenance",
        """
        CREATE TABLE provenance (
            prompt_id TEXT NOT NULL,
            generator TEXT NOT NULL,
            seed INTEGER NOT NULL,
            sample_id TEXT NOT NULL,
            prompt TEXT NOT NULL,
            keyword TEXT,
            model TEXT NOT NULL,
            path TEXT NOT NULL,
            data_json TEXT NOT NULL,
            run_id TEXT,
            created_at REAL NOT NULL,
            PRIMARY KEY (prompt_id, generator, seed)
        );
        CREATE INDEX provenance_sample ON provenance (sample_id);
        CREATE INDEX provenance_prompt_seed ON provenance (prompt_id, seed);
        """,
    ),
    (
        "0009_cascade_batches",
        """
        ALTER TABLE annotations ADD COLUMN decided_by TEXT;
        CREATE INDEX annotations_decided_by ON annotations (config_hash, decided_by);

        CREATE TABLE batch_jobs (
            batch_id TEXT PRIMARY KEY,
            run_key TEXT NOT NULL,
            stage TEXT NOT NULL,
            input_file_id TEXT NOT NULL,
            status TEXT NOT NULL,
            output_file_id TEXT,
            error_file_id TEXT,
            requests INTEGER NOT NULL DEFAULT 0,
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL,
            collected_at REAL
        );
        CREATE INDEX batch_jobs_run ON batch_jobs (run_key, stage);

        CREATE TABLE batch_requests (
            custom_id TEXT NOT NULL,
            batch_id TEXT NOT NULL REFERENCES batch_jobs (batch_id) ON DELETE CASCADE,
            PRIMARY KEY (custom_id, batch_id)
        );
        CREATE INDEX batch_requests_batch ON batch_requests (batch_id);
        """,
    ),
    (
        "0010_reviews",
        """
        CREATE TABLE reviews (
            id INTEGER PRIMARY KEY,
            set_name TEXT NOT NULL,
            sample_id TEXT NOT NULL REFERENCES samples (id),
            reviewer TEXT NOT NULL,
            harmful INTEGER NOT NULL CHECK (harmful IN (0, 1)),
            categories_json TEXT NOT NULL DEFAULT '[]',
            note TEXT NOT NULL DEFAULT '',
            adjudication INTEGER NOT NULL DEFAULT 0 CHECK (adjudication IN (0, 1)),
            at REAL NOT NULL,
            undone_at REAL
        );
        CREATE INDEX reviews_set_sample ON reviews (set_name, sample_id, reviewer);
        CREATE INDEX reviews_set_reviewer ON reviews (set_name, reviewer, id);
        CREATE TABLE review_state (
            set_name TEXT NOT NULL,
            sample_id TEXT NOT NULL REFERENCES samples (id),
            reviews INTEGER NOT NULL,
            harmful_votes INTEGER NOT NULL,
            adjudicated INTEGER NOT NULL DEFAULT 0,
            updated_at REAL NOT NULL,
            PRIMARY KEY (set_name, sample_id)
        );
        ALTER TABLE labelled_sets ADD COLUMN reviewer TEXT NOT NULL DEFAULT '';
        CREATE INDEX samples_source ON samples (source);
        CREATE INDEX samples_keyword ON samples (keyword);
        CREATE INDEX samples_generator ON samples (generator);
        CREATE INDEX samples_split ON samples (split);
        """,
    ),
    (
        "0011_gallery_index",
        """
        CREATE TABLE gallery_configs (id INTEGER PRIMARY KEY, config_hash TEXT NOT NULL UNIQUE);
        CREATE TABLE gallery_facets (
            config INTEGER NOT NULL,
            facet TEXT NOT NULL,
            sample INTEGER NOT NULL,
            PRIMARY KEY (config, facet, sample)
        ) WITHOUT ROWID;
        CREATE TABLE gallery_scores (
            config INTEGER NOT NULL,
            score REAL NOT NULL,
            sample INTEGER NOT NULL,
            PRIMARY KEY (config, score, sample)
        ) WITHOUT ROWID;
        CREATE TABLE gallery_blocks (
            kind TEXT NOT NULL,
            key TEXT NOT NULL,
            block INTEGER NOT NULL,
            n INTEGER NOT NULL,
            PRIMARY KEY (kind, key, block)
        ) WITHOUT ROWID;
        CREATE INDEX samples_label ON samples (label) WHERE label IS NOT NULL;

        INSERT INTO gallery_configs (config_hash) SELECT DISTINCT config_hash FROM annotations ORDER BY config_hash;
        INSERT OR IGNORE INTO gallery_facets (config, facet, sample)
            SELECT c.id, 's:' || a.status, s.rowid
            FROM annotations a JOIN samples s ON s.id = a.sample_id
            JOIN gallery_configs c ON c.config_hash = a.config_hash;
        INSERT OR IGNORE INTO gallery_facets (config, facet, sample)
            SELECT c.id, 'd:' || CASE a.harmful WHEN 1 THEN 'harmful' WHEN 0 THEN 'not_harmful' ELSE 'none' END, s.rowid
            FROM annotations a JOIN samples s ON s.id = a.sample_id
            JOIN gallery_configs c ON c.config_hash = a.config_hash;
        INSERT OR IGNORE INTO gallery_facets (config, facet, sample)
            SELECT c.id, 'b:' || a.decided_by, s.rowid
            FROM annotations a JOIN samples s ON s.id = a.sample_id
            JOIN gallery_configs c ON c.config_hash = a.config_hash
            WHERE a.decided_by IS NOT NULL;
        INSERT OR IGNORE INTO gallery_facets (config, facet, sample)
            SELECT c.id, 'c:' || j.value, s.rowid
            FROM annotations a JOIN samples s ON s.id = a.sample_id
            JOIN gallery_configs c ON c.config_hash = a.config_hash,
            json_each(IIF(json_valid(a.categories_json), a.categories_json, '[]')) j;
        INSERT OR IGNORE INTO gallery_scores (config, score, sample)
            SELECT c.id, a.score, s.rowid FROM annotations a
            JOIN samples s ON s.id = a.sample_id
            JOIN gallery_configs c ON c.config_hash = a.config_hash
            WHERE a.score IS NOT NULL;
        INSERT INTO gallery_blocks (kind, key, block, n)
            SELECT 's', '', rowid >> 8, COUNT(*) FROM samples GROUP BY rowid >> 8;
        INSERT INTO gallery_blocks (kind, key, block, n)
            SELECT 'a', a.config_hash, s.rowid >> 8, COUNT(*) FROM annotations a JOIN samples s ON s.id = a.sample_id
            GROUP BY a.config_hash, s.rowid >> 8;
        INSERT INTO gallery_blocks (kind, key, block, n)
            SELECT 'l', l.name, s.rowid >> 8, COUNT(*) FROM labelled_sets l JOIN samples s ON s.id = l.sample_id
            GROUP BY l.name, s.rowid >> 8;

        CREATE TRIGGER gallery_sample_insert AFTER INSERT ON samples BEGIN
            INSERT INTO gallery_blocks (kind, key, block, n) VALUES ('s', '', NEW.rowid >> 8, 1)
                ON CONFLICT (kind, key, block) DO UPDATE SET n = n + 1;
        END;
        CREATE TRIGGER gallery_sample_delete AFTER DELETE ON samples BEGIN
            UPDATE gallery_blocks SET n = n - 1 WHERE kind = 's' AND key = '' AND block = OLD.rowid >> 8;
        END;
        CREATE TRIGGER gallery_annotation_insert AFTER INSERT ON annotations BEGIN
            INSERT OR IGNORE INTO gallery_configs (config_hash) VALUES (NEW.config_hash);
            INSERT OR IGNORE INTO gallery_facets (config, facet, sample)
                SELECT c.id, f.facet, s.rowid FROM gallery_configs c, samples s, (SELECT 's:' || NEW.status AS facet
            UNION ALL SELECT 'd:' || CASE NEW.harmful WHEN 1 THEN 'harmful' WHEN 0 THEN 'not_harmful' ELSE 'none' END
            UNION ALL SELECT 'b:' || NEW.decided_by WHERE NEW.decided_by IS NOT NULL
            UNION ALL SELECT 'c:' || value
                FROM json_each(IIF(json_valid(NEW.categories_json), NEW.categories_json, '[]'))) f
                WHERE c.config_hash = NEW.config_hash AND s.id = NEW.sample_id;
            INSERT OR IGNORE INTO gallery_scores (config, score, sample)
                SELECT c.id, NEW.score, s.rowid FROM gallery_configs c, samples s
                WHERE NEW.score IS NOT NULL AND c.config_hash = NEW.config_hash AND s.id = NEW.sample_id;
            INSERT INTO gallery_blocks (kind, key, block, n)
                SELECT 'a', NEW.config_hash, s.rowid >> 8, 1 FROM samples s WHERE s.id = NEW.sample_id
                ON CONFLICT (kind, key, block) DO UPDATE SET n = n + 1;
        END;
        CREATE TRIGGER gallery_annotation_delete AFTER DELETE ON annotations BEGIN
            DELETE FROM gallery_facets
                WHERE config = (SELECT id FROM gallery_configs WHERE config_hash = OLD.config_hash)
                AND sample = (SELECT rowid FROM samples WHERE id = OLD.sample_id)
                AND facet IN (SELECT 's:' || OLD.status AS facet
            UNION ALL SELECT 'd:' || CASE OLD.harmful WHEN 1 THEN 'harmful' WHEN 0 THEN 'not_harmful' ELSE 'none' END
            UNION ALL SELECT 'b:' || OLD.decided_by WHERE OLD.decided_by IS NOT NULL
            UNION ALL SELECT 'c:' || value
                FROM json_each(IIF(json_valid(OLD.categories_json), OLD.categories_json, '[]')));
            DELETE FROM gallery_scores
                WHERE config = (SELECT id FROM gallery_configs WHERE config_hash = OLD.config_hash)
                AND score = OLD.score AND sample = (SELECT rowid FROM samples WHERE id = OLD.sample_id);
            UPDATE gallery_blocks SET n = n - 1 WHERE kind = 'a' AND key = OLD.config_hash
                AND block = (SELECT rowid >> 8 FROM samples WHERE id = OLD.sample_id);
        END;
        CREATE TRIGGER gallery_annotation_update
        AFTER UPDATE OF sample_id, config_hash, status, harmful, decided_by, categories_json, score ON annotations
        BEGIN
            DELETE FROM gallery_facets
                WHERE config = (SELECT id FROM gallery_configs WHERE config_hash = OLD.config_hash)
                AND sample = (SELECT rowid FROM samples WHERE id = OLD.sample_id)
                AND facet IN (SELECT 's:' || OLD.status AS facet
            UNION ALL SELECT 'd:' || CASE OLD.harmful WHEN 1 THEN 'harmful' WHEN 0 THEN 'not_harmful' ELSE 'none' END
            UNION ALL SELECT 'b:' || OLD.decided_by WHERE OLD.decided_by IS NOT NULL
            UNION ALL SELECT 'c:' || value
                FROM json_each(IIF(json_valid(OLD.categories_json), OLD.categories_json, '[]')));
            DELETE FROM gallery_scores
                WHERE config = (SELECT id FROM gallery_configs WHERE config_hash = OLD.config_hash)
                AND score = OLD.score AND sample = (SELECT rowid FROM samples WHERE id = OLD.sample_id);
            UPDATE gallery_blocks SET n = n - 1 WHERE kind = 'a' AND key = OLD.config_hash
                AND block = (SELECT rowid >> 8 FROM samples WHERE id = OLD.sample_id);
            INSERT OR IGNORE INTO gallery_configs (config_hash) VALUES (NEW.config_hash);
            INSERT OR IGNORE INTO gallery_facets (config, facet, sample)
                SELECT c.id, f.facet, s.rowid FROM gallery_configs c, samples s, (SELECT 's:' || NEW.status AS facet
            UNION ALL SELECT 'd:' || CASE NEW.harmful WHEN 1 THEN 'harmful' WHEN 0 THEN 'not_harmful' ELSE 'none' END
            UNION ALL SELECT 'b:' || NEW.decided_by WHERE NEW.decided_by IS NOT NULL
            UNION ALL SELECT 'c:' || value
                FROM json_each(IIF(json_valid(NEW.categories_json), NEW.categories_json, '[]'))) f
                WHERE c.config_hash = NEW.config_hash AND s.id = NEW.sample_id;
            INSERT OR IGNORE INTO gallery_scores (config, score, sample)
                SELECT c.id, NEW.score, s.rowid FROM gallery_configs c, samples s
                WHERE NEW.score IS NOT NULL AND c.config_hash = NEW.config_hash AND s.id = NEW.sample_id;
            INSERT INTO gallery_blocks (kind, key, block, n)
                SELECT 'a', NEW.config_hash, s.rowid >> 8, 1 FROM samples s WHERE s.id = NEW.sample_id
                ON CONFLICT (kind, key, block) DO UPDATE SET n = n + 1;
        END;
        CREATE TRIGGER gallery_label_replace BEFORE INSERT ON labelled_sets
        WHEN EXISTS (SELECT 1 FROM labelled_sets WHERE name = NEW.name AND sample_id = NEW.sample_id)
        BEGIN
            UPDATE gallery_blocks SET n = n - 1 WHERE kind = 'l' AND key = NEW.name
                AND block = (SELECT rowid >> 8 FROM samples WHERE id = NEW.sample_id);
        END;
        CREATE TRIGGER gallery_label_insert AFTER INSERT ON labelled_sets BEGIN
            INSERT INTO gallery_blocks (kind, key, block, n)
                SELECT 'l', NEW.name, s.rowid >> 8, 1 FROM samples s WHERE s.id = NEW.sample_id
                ON CONFLICT (kind, key, block) DO UPDATE SET n = n + 1;
        END;
        CREATE TRIGGER gallery_label_delete AFTER DELETE ON labelled_sets BEGIN
            UPDATE gallery_blocks SET n = n - 1 WHERE kind = 'l' AND key = OLD.name
                AND block = (SELECT rowid >> 8 FROM samples WHERE id = OLD.sample_id);
        END;
        """,
    ),
    (
        "0012_resume_index",
        """
        ALTER TABLE stat_index ADD COLUMN shared INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE stat_index ADD COLUMN final_config TEXT;
        ALTER TABLE stat_index ADD COLUMN final_status TEXT;
        CREATE INDEX stat_index_sha256 ON stat_index (sha256);
        CREATE INDEX samples_removed ON samples (removed_at) WHERE removed_at IS NOT NULL;
        UPDATE stat_index SET shared = 1
        WHERE sha256 IN (SELECT sha256 FROM stat_index GROUP BY sha256 HAVING count(*) > 1);
        UPDATE stat_index SET (final_config, final_status) = (
            SELECT config_hash, status FROM annotations
            WHERE sample_id = stat_index.sha256 AND status IN ('ok', 'refused', 'unparsed')
            ORDER BY id DESC LIMIT 1
        ) WHERE shared = 0;
        CREATE TRIGGER annotations_unsettle_insert AFTER INSERT ON annotations BEGIN
            UPDATE stat_index SET final_config = NULL, final_status = NULL
            WHERE sha256 = NEW.sample_id AND final_config = NEW.config_hash;
        END;
        CREATE TRIGGER annotations_unsettle_update AFTER UPDATE OF sample_id, config_hash, status ON annotations BEGIN
            UPDATE stat_index SET final_config = NULL, final_status = NULL
            WHERE sha256 = OLD.sample_id AND final_config = OLD.config_hash;
        END;
        CREATE TRIGGER annotations_unsettle_delete AFTER DELETE ON annotations BEGIN
            UPDATE stat_index SET final_config = NULL, final_status = NULL
            WHERE sha256 = OLD.sample_id AND final_config = OLD.config_hash;
        END;
        """,
    ),
    (
        "0013_reveals",
        """
        CREATE TABLE reveals (
            id INTEGER PRIMARY KEY,
            set_name TEXT NOT NULL,
            sample_id TEXT NOT NULL REFERENCES samples (id),
            reviewer TEXT NOT NULL,
            seconds INTEGER,
            at REAL NOT NULL
        );
        CREATE INDEX reveals_reviewer ON reveals (reviewer, at);
        CREATE INDEX reveals_sample ON reveals (sample_id);
        """,
    ),
    (
        "0014_truncated",
        # a turn keeps why generation stopped and the reasoning tokens spent; an annotation may be
        # `truncated`. SQLite cannot alter a CHECK, so the table's definition is widened in place
        # (https://sqlite.org/lang_altertable.html#otheralter: loosening a CHECK changes no stored
        # row); `apply_migrations` bumps the schema cookie after it so open connections reload it.
        """
        ALTER TABLE turns ADD COLUMN finish_reason TEXT;
        ALTER TABLE turns ADD COLUMN reasoning_tokens INTEGER;
        PRAGMA writable_schema = ON;
        UPDATE sqlite_master SET sql = replace(
            sql,
            'status IN (''ok'', ''refused'', ''unparsed'', ''error'')',
            'status IN (''ok'', ''refused'', ''unparsed'', ''truncated'', ''error'')'
        ) WHERE type = 'table' AND name = 'annotations';
        PRAGMA writable_schema = RESET;
        """,
    ),
    (
        "0015_credentials_are_claims",
        # A C2PA manifest now changes a sample only when its signer is trusted, and never a declared
        # source (`vhd.media.credentials`). Samples an older vhd relabelled from a valid but untrusted
        # (or any) claim get the source that was declared back (it was kept as `overrode_source`), and
        # lose the generator taken from the claim; every record gets its `trust`. A sample whose
        # source was empty before an untrusted claim made it synthetic cannot be told from one
        # declared synthetic, so its source stays (its record says `untrusted`).
        """
        UPDATE samples SET
            source = json_extract(meta_json, '$.content_credentials.overrode_source'),
            generator = IIF(generator LIKE 'claimed:%', NULL, generator),
            meta_json = json_set(
                json_remove(meta_json, '$.content_credentials.overrode_source'),
                '$.content_credentials.restored_source',
                json_extract(meta_json, '$.content_credentials.overrode_source')
            )
        WHERE json_valid(meta_json)
            AND json_extract(meta_json, '$.content_credentials.overrode_source') IS NOT NULL;
        UPDATE samples SET generator = NULL
        WHERE generator LIKE 'claimed:%' AND json_valid(meta_json)
            AND json_type(meta_json, '$.content_credentials') = 'object'
            AND json_extract(meta_json, '$.content_credentials.state') IS NOT 'Trusted';
        UPDATE samples SET meta_json = json_set(meta_json, '$.content_credentials.trust',
            CASE json_extract(meta_json, '$.content_credentials.state')
                WHEN 'Trusted' THEN 'trusted' WHEN 'Valid' THEN 'untrusted' ELSE 'invalid' END)
        WHERE json_valid(meta_json) AND json_type(meta_json, '$.content_credentials') = 'object'
            AND json_extract(meta_json, '$.content_credentials.trust') IS NULL;
        """,
    ),
    (
        "0016_labelled_set_segments",
        # A human label may say where in a video the harm is: its harmful spans as a JSON list of
        # `Segment.to_dict()` objects; NULL when the label gives no spans.
        """
        ALTER TABLE labelled_sets ADD COLUMN segments_json TEXT;
        """,
    ),
    (
        "0017_video_segments",
        """
        CREATE TABLE segments (
            sample_id TEXT NOT NULL,
            config_hash TEXT NOT NULL,
            idx INTEGER NOT NULL CHECK (idx >= 0),
            run_id TEXT,
            start_s REAL NOT NULL,
            end_s REAL NOT NULL,
            harmful INTEGER CHECK (harmful IN (0, 1)),
            score REAL,
            reason TEXT NOT NULL DEFAULT '',
            categories_json TEXT NOT NULL DEFAULT '[]',
            severity TEXT,
            decided_by TEXT,
            calls INTEGER NOT NULL DEFAULT 0,
            PRIMARY KEY (sample_id, config_hash, idx)
        ) WITHOUT ROWID;
        """,
    ),
    (
        "0018_policies_and_severity",
        # Every policy a run used (`vhd annotate --policy`), kept by its content hash with its text
        # (canonical YAML); each run names its policy; an annotation keeps the severity level the
        # judge gave with a harmful verdict, a review the level a reviewer set. Runs from before
        # have no policy recorded (NULL).
        """
        CREATE TABLE policies (
            hash TEXT PRIMARY KEY,
            name TEXT NOT NULL,
            version TEXT NOT NULL,
            text TEXT NOT NULL,
            first_used REAL NOT NULL
        );
        ALTER TABLE runs ADD COLUMN policy_hash TEXT REFERENCES policies (hash);
        ALTER TABLE annotations ADD COLUMN severity TEXT;
        ALTER TABLE reviews ADD COLUMN severity TEXT;
        """,
    ),
    (
        "0019_gallery_newest",
        # The review app's default view shows each sample's newest verdict (the annotation with the
        # highest id), whichever configuration made it. Its filters, orders and histograms read the
        # same index as a configuration's: a pseudo-configuration `''` in `gallery_configs` whose
        # facets, scores and blocks are those of each sample's newest annotation, kept in step by
        # the triggers below (a write touches the index rows of its own sample only).
        _GALLERY_NEWEST,
    ),
    (
        "0020_review_spans",
        # A reviewer's time spans on a video (the review app): a segment of the annotation confirmed
        # or corrected (``segment_idx`` set, the newest decision of a reviewer on that segment wins),
        # or a harmful span marked by hand (``segment_idx`` NULL). Removing one sets ``removed_at``.
        # The harmful ones are human labels: they are the ``segments`` of the sample's label in
        # the labelled set the reviews settle into.
        """
        CREATE TABLE review_spans (
            id INTEGER PRIMARY KEY,
            set_name TEXT NOT NULL,
            sample_id TEXT NOT NULL REFERENCES samples (id),
            reviewer TEXT NOT NULL,
            start_s REAL NOT NULL CHECK (start_s >= 0),
            end_s REAL NOT NULL,
            harmful INTEGER NOT NULL CHECK (harmful IN (0, 1)),
            segment_idx INTEGER,
            config_hash TEXT,
            at REAL NOT NULL,
            removed_at REAL,
            CHECK (end_s > start_s)
        );
        CREATE INDEX review_spans_sample ON review_spans (set_name, sample_id);
        """,
    ),
]
"""Every schema change, oldest first."""

_MIGRATIONS_TABLE = """
CREATE TABLE IF NOT EXISTS migrations (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    applied_at REAL NOT NULL
)
"""


def split_statements(sql: str) -> list[str]:
    """Split a script into complete SQL statements (trigger bodies stay whole).

    Args:
        sql: One or more statements separated by semicolons.

    Returns:
        The statements, stripped, without empty ones.
    """
    statements: list[str] = []
    current = ""
    for line in sql.splitlines(keepends=True):
        current += line
        if sqlite3.complete_statement(current):
            if current.strip().rstrip(";").strip():
                statements.append(current.strip())
            current = ""
    if current.strip():
        statements.append(current.strip())
    return statements


def applied_migrations(conn: sqlite3.Connection) -> list[str]:
    """Return the names of the migrations a database records, in the order they ran."""
    rows = conn.execute("SELECT name FROM migrations ORDER BY id").fetchall()
    return [str(r[0]) for r in rows]


def apply_migrations(
    conn: sqlite3.Connection, *, label: str = "the store", path: str | os.PathLike[str] | None = None
) -> list[str]:
    """Bring a database's schema up to date, backing an existing store up first.

    The connection must be in autocommit mode (``isolation_level=None``): the pending migrations
    run in one ``BEGIN IMMEDIATE`` transaction, so two processes opening a store at the same time
    neither both apply them nor see half of them.

    Args:
        conn: An open connection in autocommit mode.
        label: How to name the database in error messages (usually its path).
        path: The database file; when given and the store already holds migrations, a copy of it
            is written to ``<path>.bak-<number of migrations it holds>`` before any is applied.

    Returns:
        The names of the migrations applied by this call (empty when already current).

    Raises:
        VhdError: The database records a migration this vhd does not know (written by a newer
            vhd).
        ConfigError: The file holds tables but is not a vhd store, or the backup could not be
            written (the store is then unchanged).
    """
    tables = {str(r[0]) for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if tables and "migrations" not in tables:
        raise ConfigError(
            f"{label} is an SQLite database but not a vhd store: pass a new or existing vhd store path instead"
        )
    conn.execute(_MIGRATIONS_TABLE)
    applied = applied_migrations(conn)
    _check_known(applied, label)
    if all(name in applied for name, _ in MIGRATIONS):
        return []
    done: list[str] = []
    conn.execute("BEGIN IMMEDIATE")
    try:
        applied = applied_migrations(conn)
        _check_known(applied, label)
        pending = [(index, name, sql) for index, (name, sql) in enumerate(MIGRATIONS) if name not in applied]
        if pending and applied and path is not None:
            backup_store(path, Path(f"{os.fspath(path)}.bak-{len(applied)}"), label)
        for index, name, sql in pending:
            for statement in split_statements(sql):
                conn.execute(statement)
            if "writable_schema" in sql:  # a definition edited in place: make every connection reload it
                cookie = int(conn.execute("PRAGMA schema_version").fetchone()[0])
                conn.execute("PRAGMA writable_schema = ON")
                conn.execute(f"PRAGMA schema_version = {cookie + 1}")
                conn.execute("PRAGMA writable_schema = RESET")
            conn.execute("INSERT INTO migrations (name, applied_at) VALUES (?, ?)", (name, time.time()))
            conn.execute(f"PRAGMA user_version = {index + 1}")
            done.append(name)
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return done


def backup_store(source: str | os.PathLike[str], target: Path, label: str = "the store") -> None:
    """Write a consistent copy of a store with SQLite's backup API, atomically.

    It reads through a connection of its own, so the caller may hold the write lock (and should,
    to keep the copy current). The copy is a single file (rollback journal, no ``-wal``).

    Raises:
        ConfigError: The copy could not be written (full disk, permissions); nothing is left
            behind but the untouched store.
    """
    tmp = target.with_name(target.name + ".tmp")
    try:
        src = sqlite3.connect(os.fspath(source), timeout=30)
        try:
            dest = sqlite3.connect(tmp)
            try:
                src.backup(dest)
                dest.execute("PRAGMA journal_mode = DELETE")
            finally:
                dest.close()
        finally:
            src.close()
        os.replace(tmp, target)
    except (sqlite3.Error, OSError) as exc:
        for leftover in (tmp, Path(f"{tmp}-wal"), Path(f"{tmp}-shm"), Path(f"{tmp}-journal")):
            with suppress(OSError):
                leftover.unlink()
        raise ConfigError(
            f"cannot back up {label} to {target} before upgrading its schema ({exc}): free some disk space "
            "or fix the folder's permissions, then run again; the store is unchanged"
        ) from exc


def _check_known(applied: list[str], label: str) -> None:
    known = {name for name, _ in MIGRATIONS}
    unknown = [name for name in applied if name not in known]
    if unknown:
        raise VhdError(
            f"{label} was written by a newer vhd (schema migration {unknown[0]!r} is unknown "
            "here): upgrade vhd with `pip install -U vhd`, or use another store"
        )
