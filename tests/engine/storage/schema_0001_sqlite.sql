CREATE TABLE alembic_version (
	version_num VARCHAR(32) NOT NULL, 
	CONSTRAINT alembic_version_pkc PRIMARY KEY (version_num)
);
CREATE TABLE characters (
	id VARCHAR(32) NOT NULL, 
	name TEXT NOT NULL, 
	data JSON NOT NULL, 
	created_at DATETIME NOT NULL, 
	CONSTRAINT pk_characters PRIMARY KEY (id)
);
CREATE TABLE library_meta (
	"key" VARCHAR(64) NOT NULL, 
	value TEXT NOT NULL, 
	CONSTRAINT pk_library_meta PRIMARY KEY ("key")
);
CREATE TABLE personas (
	id VARCHAR(32) NOT NULL, 
	name TEXT NOT NULL, 
	data JSON NOT NULL, 
	created_at DATETIME NOT NULL, 
	CONSTRAINT pk_personas PRIMARY KEY (id)
);
CREATE TABLE chats (
	id VARCHAR(32) NOT NULL, 
	title TEXT NOT NULL, 
	character_id VARCHAR(32), 
	persona_id VARCHAR(32), 
	parent_id VARCHAR(32), 
	branch_point INTEGER, 
	settings JSON NOT NULL, 
	data JSON NOT NULL, 
	created_at DATETIME NOT NULL, 
	updated_at DATETIME NOT NULL, 
	CONSTRAINT pk_chats PRIMARY KEY (id), 
	CONSTRAINT fk_chats_character_id_characters FOREIGN KEY(character_id) REFERENCES characters (id) ON DELETE SET NULL, 
	CONSTRAINT fk_chats_parent_id_chats FOREIGN KEY(parent_id) REFERENCES chats (id) ON DELETE SET NULL, 
	CONSTRAINT fk_chats_persona_id_personas FOREIGN KEY(persona_id) REFERENCES personas (id) ON DELETE SET NULL
);
CREATE INDEX ix_chats_character_id ON chats (character_id);
CREATE INDEX ix_chats_parent_id ON chats (parent_id);
CREATE TABLE lorebooks (
	id VARCHAR(32) NOT NULL, 
	name TEXT NOT NULL, 
	data JSON NOT NULL, 
	character_id VARCHAR(32), 
	created_at DATETIME NOT NULL, 
	CONSTRAINT pk_lorebooks PRIMARY KEY (id), 
	CONSTRAINT fk_lorebooks_character_id_characters FOREIGN KEY(character_id) REFERENCES characters (id) ON DELETE CASCADE
);
CREATE INDEX ix_lorebooks_character_id ON lorebooks (character_id);
CREATE TABLE audits (
	chat_id VARCHAR(32) NOT NULL, 
	generation_id VARCHAR(32) NOT NULL, 
	status VARCHAR(16) NOT NULL, 
	error_code VARCHAR(64), 
	created_at DATETIME NOT NULL, 
	finished_at DATETIME, 
	data JSON NOT NULL, 
	CONSTRAINT pk_audits PRIMARY KEY (chat_id), 
	CONSTRAINT fk_audits_chat_id_chats FOREIGN KEY(chat_id) REFERENCES chats (id) ON DELETE CASCADE
);
CREATE TABLE chat_lorebooks (
	chat_id VARCHAR(32) NOT NULL, 
	lorebook_id VARCHAR(32) NOT NULL, 
	position INTEGER NOT NULL, 
	CONSTRAINT pk_chat_lorebooks PRIMARY KEY (chat_id, lorebook_id), 
	CONSTRAINT fk_chat_lorebooks_chat_id_chats FOREIGN KEY(chat_id) REFERENCES chats (id) ON DELETE CASCADE, 
	CONSTRAINT fk_chat_lorebooks_lorebook_id_lorebooks FOREIGN KEY(lorebook_id) REFERENCES lorebooks (id) ON DELETE CASCADE
);
CREATE TABLE lorebook_entries (
	id INTEGER NOT NULL, 
	lorebook_id VARCHAR(32) NOT NULL, 
	position INTEGER NOT NULL, 
	uid TEXT NOT NULL, 
	comment TEXT NOT NULL, 
	constant BOOLEAN NOT NULL, 
	disable BOOLEAN NOT NULL, 
	data JSON NOT NULL, 
	CONSTRAINT pk_lorebook_entries PRIMARY KEY (id), 
	CONSTRAINT fk_lorebook_entries_lorebook_id_lorebooks FOREIGN KEY(lorebook_id) REFERENCES lorebooks (id) ON DELETE CASCADE, 
	CONSTRAINT uq_lorebook_entries_position UNIQUE (lorebook_id, position)
);
CREATE INDEX ix_lorebook_entries_lorebook_id ON lorebook_entries (lorebook_id);
CREATE TABLE messages (
	id INTEGER NOT NULL, 
	chat_id VARCHAR(32) NOT NULL, 
	idx INTEGER NOT NULL, 
	role VARCHAR(16) NOT NULL, 
	name TEXT, 
	content JSON, 
	tool_calls JSON, 
	tool_result_id TEXT, 
	tool_result_key VARCHAR(16), 
	pinned BOOLEAN NOT NULL, 
	manual_excluded BOOLEAN NOT NULL, 
	hidden BOOLEAN NOT NULL, 
	swipes JSON, 
	extra JSON NOT NULL, 
	CONSTRAINT pk_messages PRIMARY KEY (id), 
	CONSTRAINT fk_messages_chat_id_chats FOREIGN KEY(chat_id) REFERENCES chats (id) ON DELETE CASCADE, 
	CONSTRAINT uq_messages_chat_idx UNIQUE (chat_id, idx)
);
CREATE INDEX ix_messages_chat_id ON messages (chat_id);
