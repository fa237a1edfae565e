package postgres

// enqueueFunction defines buffer_enqueue, which stores a batch of messages
// in one statement (so one round trip and one transaction per batch; see
// commit.go). The arrays hold one element per message, in arrival order;
// the batch has no two messages with the same (machine, non-empty key).
// It returns one row per message: its 1-based position, its id (0 if it
// was refused for lack of room), whether it is a duplicate of a stored
// message, and the machine's occupancy after it (before it, if refused).
//
// It locks the batch's usage rows in machine order. If the whole batch
// fits in every machine's buffer, it inserts it in one INSERT ... ON
// CONFLICT DO NOTHING (the fast path). Otherwise it walks each machine's
// messages in arrival order: a key already stored is a
// duplicate; a message that does not fit first deletes the machine's
// expired messages and tries again; one that fits draws the next id. Ids
// are drawn under the lock, so per machine they increase in commit order.
// Then it inserts the admitted messages and writes the new usage.
const enqueueFunction = `
	CREATE FUNCTION buffer_enqueue(
		p_machine text[], p_owner text[], p_key text[], p_service text[], p_method text[],
		p_metadata text[], p_payload bytea[], p_size bigint[], p_created timestamptz[],
		p_expires timestamptz[], p_max_messages bigint[], p_max_bytes bigint[], p_now timestamptz)
	RETURNS TABLE (item integer, message_id bigint, is_duplicate boolean, held_messages bigint, held_bytes bigint)
	LANGUAGE plpgsql AS $fn$
	DECLARE
		r         record;
		cur       text;
		n         bigint;
		b         bigint;
		reclaimed boolean;
		freed_n   bigint;
		freed_b   bigint;
		ins_item  integer[] := '{}';
		ins_id    bigint[] := '{}';
		upd_m     text[] := '{}';
		upd_n     bigint[] := '{}';
		upd_b     bigint[] := '{}';
		fits      boolean;
		ids       bigint[];
	BEGIN
		-- Machine order, as in every transaction that locks usage rows, so
		-- concurrent batches cannot deadlock.
		INSERT INTO machine_buffer_usage (machine_id)
			SELECT DISTINCT m FROM unnest(p_machine) AS m ORDER BY 1
			ON CONFLICT DO NOTHING;
		PERFORM 1 FROM machine_buffer_usage u
			WHERE u.machine_id = ANY (p_machine) ORDER BY u.machine_id FOR UPDATE;

		-- Fast path: every message fits even if none is a duplicate. Insert
		-- them all at once; the unique key index skips the duplicates,
		-- whose ids are then looked up.
		SELECT coalesce(bool_and(u.messages + t.n <= t.max_n AND u.bytes + t.b <= t.max_b), true)
		INTO fits
		FROM (
			SELECT i.machine, count(*) AS n, sum(i.size) AS b, min(i.max_n) AS max_n, min(i.max_b) AS max_b
			FROM unnest(p_machine, p_size, p_max_messages, p_max_bytes) AS i(machine, size, max_n, max_b)
			GROUP BY i.machine
		) t
		CROSS JOIN LATERAL (
			SELECT u.messages, u.bytes FROM machine_buffer_usage u
			WHERE u.machine_id = t.machine LIMIT 1
		) u;
		IF fits THEN
			-- Sorted ids by arrival order, so per machine they increase in
			-- arrival order; a duplicate wastes its id.
			ids := ARRAY(SELECT nextval('buffered_messages_id_seq') AS v
				FROM generate_series(1, cardinality(p_machine)) ORDER BY v);
			RETURN QUERY
			WITH ins AS (
				INSERT INTO buffered_messages (id, machine_id, owner_id, idempotency_key, service, method,
					metadata, payload, size, created_at, expires_at)
				SELECT ids[i.ord], i.machine, i.owner, nullif(i.key, ''), i.service, i.method,
					i.metadata::jsonb, i.payload, i.size, i.created, i.expires
				FROM unnest(p_machine, p_owner, p_key, p_service, p_method, p_metadata, p_payload,
						p_size, p_created, p_expires)
					WITH ORDINALITY AS i(machine, owner, key, service, method, metadata, payload,
						size, created, expires, ord)
				ON CONFLICT (machine_id, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
				RETURNING id, machine_id, size
			), upd AS (
				UPDATE machine_buffer_usage u SET messages = u.messages + t.n, bytes = u.bytes + t.b
				FROM (SELECT ins.machine_id, count(*) AS n, sum(ins.size) AS b FROM ins GROUP BY ins.machine_id) t
				WHERE u.machine_id = t.machine_id
			)
			SELECT i.ord::integer,
				coalesce(ins.id, (
					SELECT m.id FROM buffered_messages m
					WHERE m.machine_id = i.machine AND m.idempotency_key = i.key LIMIT 1
				), -1),
				ins.id IS NULL, 0::bigint, 0::bigint
			FROM unnest(p_machine, p_key) WITH ORDINALITY AS i(machine, key, ord)
			LEFT JOIN ins ON ins.id = ids[i.ord];
			RETURN;
		END IF;

		-- Slow path, when a buffer may fill up: message by message.

		FOR r IN
			SELECT i.ord::integer AS ord, i.machine, i.size, i.max_n, i.max_b,
				m.id AS existing, u.messages, u.bytes
			FROM unnest(p_machine, p_key, p_size, p_max_messages, p_max_bytes)
				WITH ORDINALITY AS i(machine, key, size, max_n, max_b, ord)
			-- LATERAL ... LIMIT 1 keeps both lookups index probes: a plain
			-- join may be planned (and the plan cached) while the tables
			-- are empty as a hash join over a scan of the whole table.
			CROSS JOIN LATERAL (
				SELECT u.messages, u.bytes FROM machine_buffer_usage u
				WHERE u.machine_id = i.machine LIMIT 1
			) u
			LEFT JOIN LATERAL (
				SELECT m.id FROM buffered_messages m
				WHERE i.key <> '' AND m.machine_id = i.machine AND m.idempotency_key = i.key
				LIMIT 1
			) m ON true
			ORDER BY i.machine, i.ord
		LOOP
			IF cur IS DISTINCT FROM r.machine THEN
				IF cur IS NOT NULL THEN
					upd_m := upd_m || cur; upd_n := upd_n || n; upd_b := upd_b || b;
				END IF;
				cur := r.machine; n := r.messages; b := r.bytes; reclaimed := false;
			END IF;
			item := r.ord;
			IF r.existing IS NOT NULL THEN
				message_id := r.existing; is_duplicate := true;
				held_messages := n; held_bytes := b;
				RETURN NEXT;
				CONTINUE;
			END IF;
			IF (n + 1 > r.max_n OR b + r.size > r.max_b) AND NOT reclaimed THEN
				reclaimed := true;
				WITH d AS (
					DELETE FROM buffered_messages m
					WHERE m.machine_id = r.machine AND m.expires_at <= p_now
					RETURNING m.size
				)
				SELECT count(*), coalesce(sum(d.size), 0) INTO freed_n, freed_b FROM d;
				n := n - freed_n; b := b - freed_b;
			END IF;
			is_duplicate := false;
			IF n + 1 > r.max_n OR b + r.size > r.max_b THEN
				message_id := 0;
			ELSE
				n := n + 1; b := b + r.size;
				message_id := nextval('buffered_messages_id_seq');
				ins_item := ins_item || r.ord; ins_id := ins_id || message_id;
			END IF;
			held_messages := n; held_bytes := b;
			RETURN NEXT;
		END LOOP;
		IF cur IS NOT NULL THEN
			upd_m := upd_m || cur; upd_n := upd_n || n; upd_b := upd_b || b;
		END IF;

		INSERT INTO buffered_messages (id, machine_id, owner_id, idempotency_key, service, method,
			metadata, payload, size, created_at, expires_at)
		SELECT x.id, i.machine, i.owner, nullif(i.key, ''), i.service, i.method,
			i.metadata::jsonb, i.payload, i.size, i.created, i.expires
		FROM unnest(ins_item, ins_id) AS x(item, id)
		JOIN unnest(p_machine, p_owner, p_key, p_service, p_method, p_metadata, p_payload,
				p_size, p_created, p_expires)
			WITH ORDINALITY AS i(machine, owner, key, service, method, metadata, payload,
				size, created, expires, ord)
			ON i.ord = x.item;

		UPDATE machine_buffer_usage u SET messages = v.n, bytes = v.b
		FROM unnest(upd_m, upd_n, upd_b) AS v(m, n, b)
		WHERE u.machine_id = v.m AND (u.messages, u.bytes) IS DISTINCT FROM (v.n, v.b);
	END
	$fn$;`

// enqueueFastFunction defines buffer_enqueue_fast (migration 2), which
// commit.go calls for every batch. It takes buffer_enqueue's arguments plus
// three the caller computes: the batch's smallest limits and its number of
// distinct machines. Its fast path is one statement:
//
//   - reserved: one upsert of the batch's machine_buffer_usage rows, in
//     machine order, that adds each machine's messages and bytes to its row
//     if they fit under the smallest limits. INSERT ... ON CONFLICT DO
//     UPDATE locks the existing row (waiting for other replicas) and checks
//     the fit against its latest version, and it always probes the primary
//     key, so its plan does not depend on table statistics.
//   - ins: one INSERT of all messages, ids drawn in arrival order. Its
//     source is gated on the count of reserved rows (a one-time filter, an
//     InitPlan evaluated before the first row), so reserved has run and
//     holds the locks before the first id is drawn.
//
// It returns one row whose ids hold every message's id, in arrival order.
//
// If a machine does not fit (or is new and its messages alone do not fit),
// nothing is inserted; if a key is already stored, the unique index raises
// unique_violation. Either way the block's subtransaction rolls back, and
// the whole batch goes through buffer_enqueue instead, in the same
// transaction, which handles duplicates, full buffers and expired messages
// message by message; its rows have ids NULL. Running it in the same
// transaction keeps the batch's place in the order of the batches behind
// it.
//
// The function plans its statement once per connection
// (force_generic_plan): the default would plan it again at every call,
// because a custom plan sized for the actual arrays looks cheaper, and
// planning cost more than executing. buffer_enqueue is pinned back to the
// default mode, as its lookups are planned from table statistics.
const enqueueFastFunction = `
	CREATE FUNCTION buffer_enqueue_fast(
		p_machine text[], p_owner text[], p_key text[], p_service text[], p_method text[],
		p_metadata text[], p_payload bytea[], p_size bigint[], p_created timestamptz[],
		p_expires timestamptz[], p_max_messages bigint[], p_max_bytes bigint[], p_now timestamptz,
		p_fit_messages bigint, p_fit_bytes bigint, p_machines integer)
	RETURNS TABLE (item integer, message_id bigint, is_duplicate boolean, held_messages bigint,
		held_bytes bigint, ids bigint[])
	LANGUAGE plpgsql
	SET plan_cache_mode = force_generic_plan
	AS $fn$
	BEGIN
		BEGIN
			WITH reserved AS (
				INSERT INTO machine_buffer_usage AS u (machine_id, messages, bytes)
				SELECT t.machine, t.n, t.b
				FROM (
					SELECT i.machine, count(*) AS n, sum(i.size)::bigint AS b
					FROM unnest(p_machine, p_size) AS i(machine, size)
					GROUP BY i.machine
				) t
				WHERE t.n <= p_fit_messages AND t.b <= p_fit_bytes
				ORDER BY t.machine
				ON CONFLICT (machine_id) DO UPDATE
					SET messages = u.messages + excluded.messages, bytes = u.bytes + excluded.bytes
					WHERE u.messages + excluded.messages <= p_fit_messages
						AND u.bytes + excluded.bytes <= p_fit_bytes
				RETURNING 1
			), ins AS (
				INSERT INTO buffered_messages (id, machine_id, owner_id, idempotency_key, service, method,
					metadata, payload, size, created_at, expires_at)
				SELECT nextval('buffered_messages_id_seq'), i.machine, i.owner, nullif(i.key, ''),
					i.service, i.method, i.metadata::jsonb, i.payload, i.size, i.created, i.expires
				FROM unnest(p_machine, p_owner, p_key, p_service, p_method, p_metadata, p_payload,
						p_size, p_created, p_expires)
					WITH ORDINALITY AS i(machine, owner, key, service, method, metadata, payload,
						size, created, expires, ord)
				WHERE (SELECT count(*) FROM reserved) = p_machines
				ORDER BY i.ord
				RETURNING id
			)
			-- nextval ran in arrival order, so sorted ids are in arrival order.
			SELECT array_agg(ins.id ORDER BY ins.id) INTO ids FROM ins;
			IF ids IS NULL THEN -- some machine did not fit: undo the others' reservations
				RAISE EXCEPTION 'buffer_enqueue_fast: a buffer may fill up' USING ERRCODE = 'BC001';
			END IF;
		EXCEPTION WHEN unique_violation OR SQLSTATE 'BC001' THEN
			ids := NULL;
		END;
		IF ids IS NOT NULL THEN
			item := 0; message_id := 0; is_duplicate := false; held_messages := 0; held_bytes := 0;
			RETURN NEXT;
			RETURN;
		END IF;
		RETURN QUERY SELECT e.item, e.message_id, e.is_duplicate, e.held_messages, e.held_bytes, NULL::bigint[]
			FROM buffer_enqueue(p_machine, p_owner, p_key, p_service, p_method, p_metadata, p_payload,
				p_size, p_created, p_expires, p_max_messages, p_max_bytes, p_now) AS e;
	END
	$fn$;

	ALTER FUNCTION buffer_enqueue(text[], text[], text[], text[], text[], text[], bytea[], bigint[],
		timestamptz[], timestamptz[], bigint[], bigint[], timestamptz)
		SET plan_cache_mode = auto;`
