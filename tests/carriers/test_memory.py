"""Episodic memory: hybrid retrieval beats BM25 on a labelled set; scope, revocation, utility, fallback."""

from __future__ import annotations

import logging
from pathlib import Path

import apsw
import pytest

from factories import build_experience
from lle.carriers.embeddings import Embedder, shared_embedder
from lle.carriers.memory import MemoryCarrier, memory_item_from, visible_keys
from lle.core import (
    CarrierItem,
    CarrierKind,
    Outcome,
    Revocation,
    Scope,
    ScopeLevel,
    Update,
    UpdateOp,
)
from lle.errors import InvalidInputError
from lle.store import Store

GLOBAL = Scope(level=ScopeLevel.global_)

# label: (family, project, task, lesson). Successes and attributed failures, several worlds.
MEMORIES: dict[str, tuple[str, str, str, str]] = {
    "shop-may": ("sql", "shop", "How many orders were placed in May 2024?",
                 "Filter orders on order_date between 2024-05-01 and 2024-05-31 and count distinct order ids."),
    "shop-cents": ("sql", "shop", "What is the total revenue of the shop in dollars?",
                   "Amounts are stored in cents in the amount column; divide the sum by 100 before answering."),
    "shop-top": ("sql", "shop", "Which customer spent the most?",
                 "Join customers to orders on customer_id, group by customer, order by sum(amount) desc, limit 1."),
    "shop-refunds": ("sql", "shop", "Net sales after refunds",
                     "Refunds are payments rows with a negative amount; also exclude status cancelled."),
    "shop-utc": ("sql", "shop", "Orders per calendar day",
                 "order_ts is a UTC timestamp; convert with date(order_ts, 'localtime') before grouping."),
    "shop-null": ("sql", "shop", "Average discount per order",
                  "discount is NULL when none was given; use coalesce(discount, 0) or the average is too high."),
    "shop-dupes": ("sql", "shop", "Number of unique customers",
                   "The customers table repeats emails in different case; count distinct lower(email)."),
    "shop-items": ("sql", "shop", "Total items sold",
                   "Failed at the plan level: summed orders.total instead of order_items.quantity."),
    "lib-overdue": ("sql", "library", "List overdue loans",
                    "A loan is overdue when returned_at is null and due_date is before today."),
    "lib-author": ("sql", "library", "Most borrowed author",
                   "Books have many authors through book_authors; join through it, books.author_name is often empty."),
    "lib-schema": ("sql", "library", "Count members who signed up last year",
                   "Failed at the observation level: never described the table; the column is signup_date."),
    "lib-isbn": ("sql", "library", "Find a book by ISBN",
                 "ISBNs are stored without hyphens; strip dashes from the input before comparing."),
    "lib-fines": ("sql", "library", "Total fines collected",
                  "Fines live in the fines table, one row per loan; the late fee is 25 cents per day."),
    "lib-copies": ("sql", "library", "Which copies are available",
                   "The copies table has a status column; on_shelf means available, repair does not."),
    "lib-join": ("sql", "library", "Member count doubled",
                 "Joining loans multiplies rows; count distinct member_id."),
    "parse-eof": ("code", "parser", "Fix failing test test_tokenize_trailing_space",
                  "The tokenizer loop stopped one character early; iterate to the end and emit the final token."),
    "parse-utf8": ("code", "parser", "Parser crashes on non-ASCII input",
                   "Open source files with encoding='utf-8'; the locale default broke on accented characters."),
    "parse-deep": ("code", "parser", "Deeply nested expressions raise RecursionError",
                   "Replace the recursive descent for parentheses with an explicit stack."),
    "parse-prec": ("code", "parser", "2+3*4 evaluates to 20",
                   "Multiplication must bind tighter: parse_term handles * and / inside parse_expr for + and -."),
    "parse-look": ("code", "parser", "Make the parser tests pass",
                   "Failed at the observation level: edited code without running the tests to see which failed."),
    "parse-exp": ("code", "parser", "Scientific notation is not parsed",
                  "The number regex had no exponent part; add [eE][+-]?digits."),
    "parse-protect": ("code", "parser", "Writes are denied",
                      "Failed at the grounding level: tried to edit tests/, which is protected; fix the source."),
    "web-csrf": ("code", "webapp", "Login form returns 403",
                 "The CSRF token was missing from the form template; add the hidden csrf field."),
    "web-n1": ("code", "webapp", "The user listing is very slow",
               "N+1 queries: prefetch the related profiles in one query."),
    "web-secret": ("code", "webapp", "App crashes at startup with KeyError SECRET_KEY",
                   "Read the secret from the environment with a development default; never hardcode it."),
    "web-pages": ("code", "webapp", "Second page repeats items",
                  "The offset was page*size with 1-based pages; use (page-1)*size."),
    "web-tz": ("code", "webapp", "Dates displayed one day off",
               "The server rendered UTC dates; convert to the user's time zone before formatting."),
    "web-migrate": ("code", "webapp", "Column does not exist after deploy",
                    "Run the database migrations before starting the server."),
    "web-cache": ("code", "webapp", "Updated profile still shows the old name",
                  "Invalidate the user's cache key after saving."),
    "web-debug": ("code", "webapp", "Hard to see why a request fails",
                  "Turn on debug logging for the request handler to get the stack trace."),
    "cook-book": ("game", "cooking", "Cook a meal following the recipe",
                  "Read the cookbook in the kitchen first; it lists the ingredients and how to prepare each."),
    "cook-knife": ("game", "cooking", "Slice the carrot",
                   "You must hold a knife before you can slice or chop; take the knife from the counter."),
    "cook-oven": ("game", "cooking", "Roast the potato",
                  "Roasting uses the oven, frying uses the stove, grilling uses the BBQ in the backyard."),
    "cook-burn": ("game", "cooking", "Prepare the meal",
                  "Failed at the plan level: cooked an ingredient twice, which burns it; cook each item once."),
    "cook-fridge": ("game", "cooking", "Find the red pepper",
                    "Ingredients are usually in the fridge; open the fridge before looking."),
    "cook-eat": ("game", "cooking", "Finish the cooking game",
                 "After preparing the meal you must eat it to win."),
    "coin-door": ("game", "coin", "Find the coin in the house",
                  "Doors start closed; open the door before moving through it."),
    "coin-map": ("game", "coin", "Find the coin in a large map",
                 "Explore systematically and remember visited rooms to avoid loops."),
    "coin-take": ("game", "coin", "Collect the coin",
                  "Failed at the plan level: saw the coin but never took it; take coin ends the game."),
    "math-units": ("reasoning", "arithmetic", "Speed and time word problem",
                   "Convert minutes to hours before multiplying by kilometres per hour."),
    "math-frac": ("reasoning", "arithmetic", "Correct answer marked wrong",
                  "The verifier expects a simplified fraction like 3/4, not the decimal 0.75."),
    "math-pct": ("reasoning", "arithmetic", "Percentage increase",
                 "Increase percent = (new - old) / old * 100: divide by the old value."),
    "math-tool": ("reasoning", "arithmetic", "Long multiplication",
                  "Recompute the result with the python tool instead of mental arithmetic."),
    "math-intdiv": ("reasoning", "arithmetic", "Average of a list",
                    "Failed at the plan level: used integer division //; use / for averages."),
    "any-errors": ("any", "any", "A tool returns an error",
                   "Read the full error message and traceback before retrying the same action."),
    "any-submit": ("any", "any", "Submitting answers",
                   "Submit only once the answer is verified; each extra submission costs score."),
    "any-denied": ("any", "any", "Permission denied on a tool",
                   "A denied action stays denied; choose another allowed tool instead of repeating it."),
    "any-small": ("any", "any", "Long multi-step tasks",
                  "Make one change at a time and check its effect before the next."),
}

# (query, label). The first eight share words with their memory; the rest are paraphrases.
QUERIES: list[tuple[str, str]] = [
    ("how many orders in May", "shop-may"),
    ("overdue loans list", "lib-overdue"),
    ("RecursionError with nested parentheses", "parse-deep"),
    ("login returns 403", "web-csrf"),
    ("slice carrot knife", "cook-knife"),
    ("percentage increase formula", "math-pct"),
    ("ISBN lookup fails", "lib-isbn"),
    ("unique customers count", "shop-dupes"),
    ("the money totals look a hundredfold too big", "shop-cents"),
    ("who is our biggest spender", "shop-top"),
    ("money given back to buyers should not count", "shop-refunds"),
    ("mean markdown is inflated by blanks", "shop-null"),
    ("which writer is checked out most often", "lib-author"),
    ("penalty charges for bringing things back late", "lib-fines"),
    ("which volumes can be borrowed right now", "lib-copies"),
    ("lexer drops the last character of the string", "parse-eof"),
    ("accented letters make reading the file blow up", "parse-utf8"),
    ("times should be evaluated before plus", "parse-prec"),
    ("numbers like 1e5 are rejected", "parse-exp"),
    ("cannot modify the test files, access refused", "parse-protect"),
    ("listing page issues hundreds of database queries", "web-n1"),
    ("server won't boot because a config variable is absent", "web-secret"),
    ("page two shows the same entries as page one", "web-pages"),
    ("user sees a stale name after editing", "web-cache"),
    ("what does the dish need and how to prepare it", "cook-book"),
    ("where do I bake something versus pan fry it", "cook-oven"),
    ("food got charred and the game was lost", "cook-burn"),
    ("can't walk into the next room, the way is shut", "coin-door"),
    ("going around in circles through the same places", "coin-map"),
    ("grader rejects 0.5, wants 1/2", "math-frac"),
    ("the tool keeps refusing me and I keep trying the same thing", "any-denied"),
    ("dividing gave a truncated whole number for the mean", "math-intdiv"),
    ("convert travel duration to the right unit before computing distance", "math-units"),
]


def memory(label: str, scope: Scope, **extra: object) -> CarrierItem:
    _family, _project, task, lesson = MEMORIES[label]
    return CarrierItem(carrier=CarrierKind.memory, scope=scope, content={"task": task, "lesson": lesson,
                       "outcome": "fail" if lesson.startswith("Failed") else "pass", "label": label},
                       **extra)  # type: ignore[arg-type]


def admit_update(item: CarrierItem) -> Update:
    return Update(carrier=CarrierKind.memory, op=UpdateOp.admit, item_id=item.id, scope=item.scope,
                  experience_ids=list(item.experience_ids))


def task_scope(family: str, project: str, task: str = "t0") -> Scope:
    return Scope(level=ScopeLevel.task, family=family, project=project, task_id=f"{family}/{project}:{task}")


@pytest.fixture(scope="module")
def labelled(tmp_path_factory: pytest.TempPathFactory) -> tuple[MemoryCarrier, dict[str, str]]:
    """All labelled memories, globally scoped (retrieval quality, not scoping, is under test)."""
    db = Store(tmp_path_factory.mktemp("labelled") / "lle.db")
    carrier = MemoryCarrier(db)
    items = [memory(label, GLOBAL) for label in MEMORIES]
    carrier.admit_many([(i, admit_update(i)) for i in items])
    return carrier, {i.id: str(i.content["label"]) for i in items}  # type: ignore[call-overload,index]


def top3_rate(carrier: MemoryCarrier, labels: dict[str, str], mode: str) -> float:
    found = 0
    for query, label in QUERIES:
        hits = carrier.search(query, task_scope("sql", "shop"), 3, mode=mode)  # type: ignore[arg-type]
        found += any(labels[h.item_id] == label for h in hits)
    return found / len(QUERIES)


def test_hybrid_finds_the_right_memory_more_often_than_bm25(labelled: tuple[MemoryCarrier, dict[str, str]],
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    carrier, labels = labelled
    assert len(MEMORIES) >= 40 and len(QUERIES) >= 30
    rates = {mode: top3_rate(carrier, labels, mode) for mode in ("bm25", "dense", "hybrid")}
    with capsys.disabled():
        print(f"\ntop-3 hit rate on {len(QUERIES)} queries / {len(MEMORIES)} memories: "
              + ", ".join(f"{m} {r:.2f}" for m, r in rates.items()))
    assert rates["hybrid"] > rates["bm25"]
    assert rates["hybrid"] >= 0.8


def test_lexical_queries_are_found_by_both(labelled: tuple[MemoryCarrier, dict[str, str]]) -> None:
    carrier, labels = labelled
    for query, label in QUERIES[:8]:
        for mode in ("bm25", "hybrid"):
            hits = carrier.search(query, task_scope("sql", "shop"), 3, mode=mode)  # type: ignore[arg-type]
            assert label in [labels[h.item_id] for h in hits], (mode, query)


def test_bm25_keeps_the_rarest_terms_within_its_budget(store: Store) -> None:
    carrier = MemoryCarrier(store, bm25_budget=2)
    assert carrier._terms("Overdue loans in the library") == {
        "overdu": "Overdue", "loan": "loans", "in": "in", "the": "the", "librari": "library"}
    texts = {"both": "orders refund", "orders1": "orders", "orders2": "orders", "refund1": "refund",
             "rare": "orders chargeback"}
    items = {name: CarrierItem(carrier=CarrierKind.memory, scope=GLOBAL, content={"lesson": text})
             for name, text in texts.items()}
    carrier.admit_many([(i, admit_update(i)) for i in items.values()])
    names = {i.id: name for name, i in items.items()}

    def bm25(query: str) -> list[str]:
        return [names[h.item_id] for h in carrier.search(query, GLOBAL, 5, mode="bm25")]

    # df: orders 4, refund 2, chargeback 1. The rarest words are kept while their rows fit the budget.
    assert bm25("the orders with a chargeback or a refund") == ["rare"]
    carrier.bm25_budget = 3
    assert set(bm25("the orders with a chargeback or a refund")) == {"rare", "both", "refund1"}
    # Every word too common for the budget: their conjunction.
    carrier.bm25_budget = 1
    assert bm25("orders refund") == ["both"]
    carrier.bm25_budget = 100
    assert set(bm25("orders refund")) == set(texts)
    # A query of nothing but stopwords still searches; field names are in the indexed JSON, hence stopwords.
    assert len(bm25("the lesson")) == len(texts)


def test_scope_filtering(store: Store) -> None:
    carrier = MemoryCarrier(store)
    shop = Scope(level=ScopeLevel.project, family="sql", project="shop")
    library = Scope(level=ScopeLevel.project, family="sql", project="library")
    placed = {
        "shop-cents": shop, "shop-may": shop, "lib-fines": library, "lib-overdue": library,
        "web-cache": Scope(level=ScopeLevel.family, family="code"),
        "any-errors": GLOBAL,
        "lib-isbn": Scope(level=ScopeLevel.task, family="sql", project="library", task_id="sql/library:t1"),
    }
    items = {label: memory(label, scope) for label, scope in placed.items()}
    carrier.admit_many([(i, admit_update(i)) for i in items.values()])
    ids = {i.id: label for label, i in items.items()}

    def seen(scope: Scope, query: str) -> set[str]:
        return {ids[h.item_id] for mode in ("hybrid", "bm25", "dense")
                for h in carrier.search(query, scope, 10, mode=mode)}  # type: ignore[arg-type]

    every_word = "revenue dollars cents orders May loans fines overdue cache profile error ISBN hyphens"
    from_library = seen(task_scope("sql", "library", "t2"), every_word)
    assert from_library <= {"lib-fines", "lib-overdue", "any-errors"} and "lib-fines" in from_library
    assert seen(task_scope("sql", "library", "t1"), "ISBN hyphens") >= {"lib-isbn"}
    assert not seen(task_scope("sql", "shop"), every_word) & {"lib-fines", "lib-overdue", "lib-isbn", "web-cache"}
    assert seen(task_scope("code", "webapp"), every_word) <= {"web-cache", "any-errors"}
    assert seen(GLOBAL, every_word) <= {"any-errors"}
    # The same project name in another family is another project.
    assert not seen(task_scope("game", "shop"), every_word) & {"shop-cents", "shop-may"}
    assert len(visible_keys(task_scope("sql", "shop"))) == 4  # global, family, project, task
    with pytest.raises(InvalidInputError, match="project"):
        bad = memory("shop-cents", Scope(level=ScopeLevel.project, family="sql"))
        carrier.admit(bad, admit_update(bad))


def test_revoked_items_are_never_returned_nor_readmitted(store: Store) -> None:
    carrier = MemoryCarrier(store)
    exp = store.append_experience(build_experience(2))
    scope = Scope(level=ScopeLevel.project, family="sql", project="shop")
    direct = memory("shop-cents", scope)
    derived = memory("shop-refunds", scope, experience_ids=[exp.id])
    keeper = memory("shop-top", scope)
    carrier.admit_many([(i, admit_update(i)) for i in (direct, derived, keeper)])
    query = "revenue in dollars cents, refunds negative amount, customer spent most"
    assert len(carrier.search(query, task_scope("sql", "shop"), 5)) == 3

    carrier.revoke(direct.id, Revocation(target=direct.id, reason="wrong lesson", author="test"))
    # Revoking the source experience (as lineage does: a new row naming the experience) blocks what derives from it.
    store.append_revocation(Revocation(target=exp.id, reason="bad episode", author="test"))
    other = MemoryCarrier(store)  # a fresh reader sees the same active view
    for reader in (carrier, other):
        for mode in ("hybrid", "bm25", "dense"):
            hits = reader.search(query, task_scope("sql", "shop"), 5, mode=mode)  # type: ignore[arg-type]
            assert [h.item_id for h in hits] == [keeper.id], mode
        assert [i.id for i in reader.retrieve(query, task_scope("sql", "shop"), 5)] == [keeper.id]
        assert reader.items([direct.id, derived.id, keeper.id]) == reader.items([keeper.id])

    with pytest.raises(InvalidInputError, match=r"revoked"):
        carrier.admit(direct, admit_update(direct))
    fresh = memory("shop-may", scope, experience_ids=[exp.id])
    with pytest.raises(InvalidInputError, match=exp.id):
        other.admit(fresh, admit_update(fresh))
    assert store.kind_of(fresh.id) is None
    with pytest.raises(InvalidInputError, match="revoked"):
        carrier.update_utility(direct.id, 1.0)
    with pytest.raises(InvalidInputError, match="cascade"):
        carrier.revoke(keeper.id, Revocation(target=direct.id, reason="x", author="test"))


def test_utility_updates_change_the_ranking(store: Store) -> None:
    carrier = MemoryCarrier(store)
    scope = Scope(level=ScopeLevel.project, family="sql", project="shop")
    # Two memories about the same thing: relevance alone cannot separate them much.
    a, b = (CarrierItem(carrier=CarrierKind.memory, scope=scope,
                        content={"task": "Total revenue in dollars", "lesson": lesson})
            for lesson in ("Amounts are in cents; divide by 100.", "Amounts are stored in cents, divide by 100."))
    carrier.admit_many([(a, admit_update(a)), (b, admit_update(b))])
    query, where = "total revenue in dollars", task_scope("sql", "shop")
    first = carrier.search(query, where, 2)[0].item_id
    second = b.id if first == a.id else a.id
    assert carrier.search(query, where, 2, use_utility=False)[0].item_id == first

    for _ in range(5):
        carrier.update_utility(first, -1.0)
        carrier.update_utility(second, 1.0, alpha=0.5)
    assert [h.item_id for h in carrier.search(query, where, 2)] == [second, first]
    assert carrier.utility(second) == pytest.approx(1 - 0.5 ** 5)
    assert carrier.utility(first) == pytest.approx(-(1 - 0.9 ** 5))
    # Utility re-ranks among relevant candidates; it does not pull in an irrelevant memory.
    off_topic = memory("cook-eat", scope)
    carrier.admit(off_topic, admit_update(off_topic))
    carrier.update_utility(off_topic.id, 1.0, alpha=1.0)
    assert off_topic.id not in [h.item_id for h in carrier.search(query, where, 2)]

    # Append-only history: one row per update, the current Q is the latest, a new reader folds the same.
    assert store.conn.execute("SELECT count(*) FROM memory_utility").fetchone()[0] == 11
    assert MemoryCarrier(store).utility(second) == pytest.approx(carrier.utility(second))
    with pytest.raises(apsw.ConstraintError, match="append-only"):
        store.conn.execute("UPDATE memory_utility SET q = 0")
    with pytest.raises(apsw.ConstraintError, match="append-only"):
        store.conn.execute("DELETE FROM memory_vectors")
    with pytest.raises(InvalidInputError):
        carrier.update_utility(first, float("nan"))


def test_credit_episode_rewards_the_memories_it_was_shown(store: Store) -> None:
    carrier = MemoryCarrier(store)
    exp = build_experience(2)
    item = memory_item_from(exp)
    carrier.admit(item, admit_update(item))
    shown = exp.model_copy(update={"steps": [s.model_copy(update={"context_refs": [item.id]}) for s in exp.steps]})
    assert carrier.credit_episode(shown) == {item.id: pytest.approx(0.1)}
    failed = shown.model_copy(update={"outcome": Outcome.failed})
    assert carrier.credit_episode(failed)[item.id] == pytest.approx(0.1 + 0.1 * (-1.0 - 0.1))
    assert carrier.credit_episode(shown.model_copy(update={"outcome": Outcome.unknown})) == {}


def test_memory_item_from_keeps_the_key_steps_and_attribution() -> None:
    exp = build_experience(5).model_copy(update={
        "credit": [0.1, 0.9, -0.5, 0.7, 0.2], "outcome": Outcome.failed,
        "attribution": {"kind": "plan", "reason": "the effect did not reach the goal", "steps": [2]}})
    item = memory_item_from(exp)
    assert item.carrier is CarrierKind.memory and item.experience_ids == [exp.id]
    assert item.scope == Scope(level=ScopeLevel.project, family="sql", project="shop")
    content = item.content
    assert isinstance(content, dict) and content["outcome"] == "fail"
    assert [s["index"] for s in content["key_steps"]] == [1, 3, 4]  # type: ignore[index,union-attr]
    assert content["attribution"] == exp.attribution and "plan" in str(content["lesson"])
    assert content["task"] == exp.small_world.goal
    task_level = memory_item_from(exp, level=ScopeLevel.task)
    assert task_level.scope.task_id == exp.small_world.id
    base = build_experience(2)
    diagnosed = [base.evidence[0].model_copy(update={"detail": {"anchor_detail": {"lesson": "amounts are in cents"}}})]
    success = memory_item_from(base.model_copy(update={"evidence": diagnosed}))
    lesson = str(success.content["lesson"])  # type: ignore[index,call-overload]
    assert lesson.startswith("Succeeded") and lesson.endswith("amounts are in cents")


def test_admit_writes_item_update_and_vector_in_one_go(store: Store) -> None:
    carrier = MemoryCarrier(store)
    item = memory("web-pages", Scope(level=ScopeLevel.project, family="code", project="webapp"))
    carrier.admit(item, admit_update(item))
    assert store.kind_of(item.id) == "carrier_items"
    assert store.list_updates(carrier="memory")[0].item_id == item.id
    assert store.conn.execute("SELECT count(*) FROM memory_vectors WHERE item_id = ?", (item.id,)).fetchone()[0] == 1
    assert store.search("offset")[0][1] == item.id
    with pytest.raises(InvalidInputError, match="already stored"):
        carrier.admit(item, admit_update(item))
    wrong = Update(carrier=CarrierKind.memory, op=UpdateOp.propose, item_id=item.id, scope=item.scope)
    with pytest.raises(InvalidInputError, match="admit"):
        carrier.admit(item, wrong)


def test_without_the_model_retrieval_falls_back_to_bm25_with_a_warning(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    db = Store(tmp_path / "lle.db")
    blind = MemoryCarrier(db, embedder=Embedder(tmp_path / "missing" / "model.onnx"))
    scope = Scope(level=ScopeLevel.project, family="sql", project="shop")
    items = [memory(label, scope) for label in ("shop-cents", "shop-may", "shop-top")]
    with caplog.at_level(logging.WARNING, logger="lle.carriers.memory"):
        blind.admit_many([(i, admit_update(i)) for i in items])
        hits = blind.search("revenue in dollars", task_scope("sql", "shop"), 3)
    assert any("falls back to BM25" in r.getMessage() and "missing" in r.getMessage() for r in caplog.records)
    assert [h.item_id for h in hits] == [h.item_id for h in blind.search("revenue in dollars",
                                                                         task_scope("sql", "shop"), 3, mode="bm25")]
    assert hits and hits[0].item_id == items[0].id and hits[0].dense_rank is None
    assert db.conn.execute("SELECT count(*) FROM memory_vectors").fetchone()[0] == 0
    # With the model back, the vectors missing from admission are filled in and dense search works.
    seeing = MemoryCarrier(db, embedder=shared_embedder())
    hit = seeing.search("the money totals look a hundredfold too big", task_scope("sql", "shop"), 1)[0]
    assert hit.item_id == items[0].id and hit.dense_rank == 1
    assert db.conn.execute("SELECT count(*) FROM memory_vectors").fetchone()[0] == 3
    db.close()
