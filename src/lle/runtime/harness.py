"""Γ's loop: build context -> policy.act -> ground -> world.step -> record, one step at a time.

Stops are exceptions that carry their reason. The stop is decided before its step is committed and
written into that step (a `Feedback(kind="stop")`), so a resumed episode knows it had ended. Every
step is committed before the next begins: a kill loses at most the step in flight. A policy error,
a malformed action or a world exception is recorded as a step with its error and ends the episode
with outcome `unknown`; nothing here ever decides success (that is evidence's job, later).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import JsonValue

from lle import __version__
from lle.actions import NO_ACTION, cap_free_text, copies_placeholder
from lle.config import Levers
from lle.context.plain import PlainContextBuilder
from lle.core import (
    ActionRequest,
    ActionStatus,
    ContextBuilder,
    Effect,
    ExecutedAction,
    Experience,
    Feedback,
    Limits,
    LLMCall,
    Policy,
    SmallWorld,
    Step,
    new_id,
)
from lle.errors import WorldError
from lle.policies import policy_info, policy_spec, start_episode
from lle.runtime import programs
from lle.runtime.grounding import Grounded, Grounder, SkillTool
from lle.runtime.levers import LeverState, NothingLeft
from lle.runtime.recorder import Assessor, NullRecorder, Recorder, StoreRecorder
from lle.store import Store
from lle.store.episodes import EpisodeRecord
from lle.worlds.base import ToolWorld, open_world

RUNTIME_VERSION = f"lle-runtime {__version__}"


class Stop(Exception):  # named for what happened, not "…Error": most episodes end with a stop
    """Why an episode ended. `reason` is the class name; `detail` says more."""

    def __init__(self, detail: str = "") -> None:
        super().__init__(detail)
        self.detail = detail

    @property
    def reason(self) -> str:
        return type(self).__name__

    def feedback(self) -> Feedback:
        return Feedback(source="runtime", kind="stop", content={"reason": self.reason, "detail": self.detail})


class Submitted(Stop):
    """The world ended the episode (`terminated`), e.g. the agent called `submit`."""


class Truncated(Stop):
    """The world cut the episode short (`truncated`)."""


class StepLimit(Stop):
    """`Limits.max_steps` steps were taken."""


class TimeLimit(Stop):
    """`Limits.max_seconds` of wall-clock time passed (checked after each step)."""


class PolicyFailed(Stop):
    """The policy raised, or asked for an action that does not parse against the tools."""


class WorldFailed(Stop):
    """The world raised while executing an allowed action."""


class Stuck(Stop):
    """The stuck lever masked out every tool: nothing else was allowed."""


STOPS: dict[str, type[Stop]] = {c.__name__: c for c in (Submitted, Truncated, StepLimit, TimeLimit, PolicyFailed,
                                                         WorldFailed, Stuck)}


def stop_of(step: Step) -> Stop | None:
    """The stop recorded on `step`, if the episode ended there."""
    for fb in step.feedback:
        if fb.source == "runtime" and fb.kind == "stop" and isinstance(fb.content, dict):
            cls = STOPS.get(str(fb.content.get("reason")), Stop)
            return cls(str(fb.content.get("detail", "")))
    return None


class Episode:
    """One episode of `policy` in `small_world`; `run()` plays it to its stop and returns the experience.

    `resume=True` continues an episode whose record is already stored, after `history` (its committed
    steps, oldest first): the world is rebuilt from its seed,
    the history's executed actions are replayed and each replayed observation must equal the
    recorded one (else `WorldError`), then the loop continues after the last committed step.
    `skills` are offered as extra tools; a call to one is expanded into its tool calls (`_expand`). The first
    offered program skill runs before the policy's first step (the fast path, `_program_first`).
    """

    def __init__(
        self,
        small_world: SmallWorld,
        policy: Policy,
        context_builder: ContextBuilder | None = None,
        limits: Limits | None = None,
        *,
        recorder: Recorder | None = None,
        episode_id: str | None = None,
        world: ToolWorld | None = None,
        world_options: Mapping[str, JsonValue] | None = None,
        resume: bool = False,
        history: Sequence[Step] = (),
        expected_initial_observation: str | None = None,
        record_timings: bool = True,
        batch: str | None = None,
        batch_key: str | None = None,
        skills: Sequence[SkillTool] = (),
        levers: Levers | None = None,
    ) -> None:
        self.small_world = small_world
        self.levers = levers or Levers()
        self.skills = list(skills)
        self.policy = policy
        self.builder: ContextBuilder = context_builder or PlainContextBuilder()
        self.limits = limits or small_world.limits
        self.recorder: Recorder = recorder or NullRecorder()
        self.id = episode_id or new_id("exp")
        self.world_options = dict(world_options or {})
        self.world = world
        self.resume = resume or bool(history)
        self.history: list[Step] = list(history)
        self.expected_initial_observation = expected_initial_observation
        self.record_timings = record_timings
        self.batch, self.batch_key = batch, batch_key
        self.stop: Stop | None = None
        self.observation = ""
        self.world_version = ""

    # --- the loop ----------------------------------------------------------------------------------

    def run(self) -> Experience:
        try:
            self._start()
            ended = stop_of(self.history[-1]) if self.history else None
            if ended is not None:
                raise ended  # killed after its last step was committed, before the experience was
            self._program_first()
            while True:
                self._step()
        except Stop as stop:
            self.stop = stop
        finally:
            if self.world is not None:
                self.world.close()
        return self.recorder.finish(self.experience())

    def _step(self) -> None:
        index = len(self.history)
        try:  # the levers may change what the model sees and may pick; each change is recorded on the step
            tools, observation, interventions = self.lever_state.prepare(self.history, self.grounder.tools,
                                                                         self.observation)
        except NothingLeft as stuck:
            self._commit(_failed_step(index, [], f"every tool was masked: {stuck}", "no action: every tool was masked"),
                         Stuck(str(stuck)))
            return
        context = self.builder.build(self.small_world, tools, self.history, observation)
        if self.levers.recipe:  # the recipe shaped this context: its item is among the step's refs
            context = context.model_copy(update={"refs": [*context.refs, self.levers.recipe]})
        if self.levers.thought_chars or self.levers.expect_chars:
            capped = cap_free_text(context.action_schema, thought_chars=self.levers.thought_chars,
                                   expect_chars=self.levers.expect_chars)
            context = context.model_copy(update={"action_schema": capped})
        try:
            request, llm = self.policy.act(context)
        except Exception as err:  # recorded on the step; KeyboardInterrupt still stops the run (resumable)
            failed = _failed_step(index, list(context.refs), f"policy raised {type(err).__name__}: {err}")
            self._commit(failed.model_copy(update={"feedback": interventions}),
                         PolicyFailed(f"{type(err).__name__}: {err}"))
            return
        notes = getattr(self.policy, "step_notes", None)
        # What the policy says about its own decision (a fast/slow agent's other model call): the step's metadata.
        said: list[Feedback] = notes() if callable(notes) else []
        if request.tool in self.grounder.skills:
            self._expand(index, list(context.refs), request, llm, [*interventions, *said])
            return
        grounded = self.grounder.ground(request, offered=[t.name for t in tools] if interventions else None)
        copied = [name for name, text in (("thought", request.thought), ("expect", request.expect))
                  if copies_placeholder(text)]
        if copied:  # the model filled a slot with the slot's own text: not its plan or prediction
            interventions = [*interventions, Feedback(source="runtime", kind="placeholder_copy",
                                                      content={"fields": list[JsonValue](copied)})]
        step = Step(index=index, context_refs=list(context.refs), llm=llm, request=request,
                    executed=grounded.executed, effect=grounded.effect,
                    feedback=[*interventions, *said, *grounded.feedback])
        self._commit(step, self._stop_after(index, grounded))

    def _expand(self, index: int, refs: list[str], request: ActionRequest, llm: LLMCall | None,
                interventions: list[Feedback]) -> None:
        """A skill call: its tool calls, each grounded and committed as its own step; a denied or failed one ends it.
        The levers' interventions of the model's step go on the first of them."""
        skill = self.grounder.skills[request.tool]
        malformed = self.grounder.check_skill_call(request)
        if malformed is not None:
            step = Step(index=index, context_refs=[*refs, skill.item_id], llm=llm, request=request,
                        executed=malformed.executed, effect=malformed.effect, feedback=interventions)
            self._commit(step, self._stop_after(index, malformed))
        if skill.program is not None:
            self._run_program(skill, request, index, [*refs, skill.item_id], llm, interventions)
            return
        observations = [self.observation]  # bound slots read the goal or what the macro has seen so far
        for n in range(skill.size):
            call = skill.call(n, request.args, goal=self.small_world.goal, observations=observations)
            # A string: a bound slot found nothing to read, so the runtime stops the macro there.
            grounded = self.grounder.deny(request, call) if isinstance(call, str) else self.grounder.ground(call)
            observations.append(grounded.effect.observation)
            failed = not grounded.executed.allowed or grounded.executed.status is ActionStatus.error
            note = Feedback(source="runtime", kind="skill", content={
                "skill": skill.item_id, "tool": request.tool, "args": request.args, "thought": request.thought,
                "call": n + 1, "of": skill.size, "stopped": failed and n + 1 < skill.size})
            step = Step(index=index + n, context_refs=[*refs, skill.item_id], llm=llm if n == 0 else None,
                        request=request if isinstance(call, str) else call, executed=grounded.executed,
                        effect=grounded.effect,
                        feedback=[*(interventions if n == 0 else []), *grounded.feedback, note])
            self._commit(step, self._stop_after(index + n, grounded))
            if failed:
                return

    def _program_first(self) -> None:
        """The fast path: a fresh episode runs its first offered program skill before the policy acts (its first
        step says which fired); a resumed one runs on the program its last committed step was in the middle of."""
        if self.history:
            found = programs.running(self.history)
            skill = next((s for s in self.grounder.skills.values() if found and s.item_id == found[2]), None)
            if found is not None and skill is not None and skill.program is not None:
                start, request, _ = found
                done = self.history[start:]
                self._run_program(skill, request, start, list(done[0].context_refs), None, [],
                                  [s.request for s in done])
            return
        for name, skill in self.grounder.skills.items():
            if skill.program is not None:
                request = ActionRequest(tool=name, thought="fast path: the runtime runs the offered program skill "
                                                           "before the policy acts")
                fired = Feedback(source="runtime", kind=programs.FIRED, content={"skill": skill.item_id})
                self._run_program(skill, request, 0, [skill.item_id], None, [fired])
                return

    def _run_program(self, skill: SkillTool, request: ActionRequest, start: int, refs: list[str],
                     llm: LLMCall | None, first: list[Feedback], made: Sequence[ActionRequest] = ()) -> None:
        """A program skill's calls from `start` (`made`: those already committed, on resume), each grounded and
        committed as its own step; a denied or failed call, or the program's failure (a denied step that says
        why), ends it. A call the grounder finds malformed is denied instead: a program's mistake is not the
        policy's, and the episode goes on."""
        assert skill.program is not None
        runner, made = programs.ProgramRunner(skill.program), list(made)
        while True:
            observations = [s.effect.observation for s in self.history[start:start + len(made)]]
            call = runner.next_call(self.small_world.goal, observations, made)
            if call is None:
                return
            if isinstance(call, str):
                grounded = self.grounder.deny(request, call)
            else:
                call = call.model_copy(update={"thought": f"{request.tool}: program call {len(made) + 1}"})
                grounded = self.grounder.ground(call)
                if grounded.failure == "malformed":
                    grounded = self.grounder.deny(call, grounded.effect.error or "malformed call")
            failed = not grounded.executed.allowed or grounded.executed.status is ActionStatus.error
            index = start + len(made)
            step = Step(index=index, context_refs=refs, llm=llm if not made else None,
                        request=request if isinstance(call, str) else call, executed=grounded.executed,
                        effect=grounded.effect, feedback=[*(first if not made else []), *grounded.feedback,
                                                          programs.note(skill.item_id, request, len(made) + 1,
                                                                        stopped=failed)])
            self._commit(step, self._stop_after(index, grounded))
            if failed or isinstance(call, str):
                return
            made.append(call)

    def _commit(self, step: Step, stop: Stop | None) -> None:
        if stop is not None:
            step = step.model_copy(update={"feedback": [*step.feedback, stop.feedback()]})
        self.recorder.commit(self.id, step)
        self.history.append(step)
        self.observation = step.effect.observation
        if stop is not None:
            raise stop

    def _stop_after(self, index: int, grounded: Grounded) -> Stop | None:
        if grounded.failure == "malformed":
            return PolicyFailed(grounded.effect.error or "malformed action")
        if grounded.failure == "world":
            return WorldFailed(grounded.effect.error or "the world raised")
        if grounded.terminated:
            return Submitted(grounded.effect.observation[:200])
        if grounded.truncated:
            return Truncated(grounded.effect.observation[:200])
        if index + 1 >= self.limits.max_steps:
            return StepLimit(f"{self.limits.max_steps} steps taken")
        if time.monotonic() - self.started > self.limits.max_seconds:
            return TimeLimit(f"over {self.limits.max_seconds:g} s")
        return None

    # --- start and resume ------------------------------------------------------------------------

    def _start(self) -> None:
        self.started = time.monotonic()
        if self.world is None:
            self.world = open_world(self.small_world, **self.world_options)
        self.world_version = str(getattr(self.world, "version", ""))
        # A policy that keeps what it evaluated (a model's prompt cache) forgets the episode before, which in a
        # pool or a slot depends on what finished first: the clock must not decide an action.
        start_episode(self.policy)
        observation, _info = self.world.reset(seed=self.small_world.seed, options=None)
        if not isinstance(observation, str):
            raise WorldError(f"{self.small_world.world}: reset returned a {type(observation).__name__} observation; "
                             "return str (run check_world on the world)")
        self.grounder = Grounder(self.small_world, self.world, record_timings=self.record_timings,
                                 skills=self.skills)
        self.lever_state = LeverState(self.levers, self.limits.max_steps, self.world)
        if self.levers.notes is not None and hasattr(self.builder, "max_items"):  # the recipe's cap on notes
            self.builder.max_items = self.levers.notes
        if not self.levers.failed_notes and hasattr(self.builder, "show_failed"):  # successes and contrasts only
            self.builder.show_failed = False
        # Resume re-derives the levers' memory from the committed steps, so it acts as an unkilled run would.
        self.lever_state.detections = sum(
            1 for step in self.history for fb in step.feedback
            if fb.kind == "intervention" and isinstance(fb.content, dict) and fb.content.get("lever") == "stuck")
        if not self.resume:
            self.recorder.begin(EpisodeRecord(
                id=self.id, small_world=self.small_world, policy=policy_info(self.policy),
                policy_spec=policy_spec(self.policy), world_options=self.world_options, limits=self.limits,
                levers=self.levers,
                initial_observation=observation, runtime_version=RUNTIME_VERSION, batch=self.batch,
                batch_key=self.batch_key))
            self.observation = observation
            return
        if self.expected_initial_observation is not None and observation != self.expected_initial_observation:
            raise _diverged(self.id, "reset", self.expected_initial_observation, observation)
        for step in self.history:
            if step.executed.allowed:  # denied and malformed requests never reached the world
                replayed = self.grounder.execute(step.request, dict(step.executed.args))
                if replayed.effect.observation != step.effect.observation:
                    raise _diverged(self.id, f"step {step.index}", step.effect.observation,
                                    replayed.effect.observation)
        self.observation = self.history[-1].effect.observation if self.history else observation
        resume_from = getattr(self.policy, "resume_from", None)
        if callable(resume_from):
            resume_from(list(self.history))

    def experience(self) -> Experience:
        return Experience(id=self.id, small_world=self.small_world, policy=policy_info(self.policy),
                          runtime_version=RUNTIME_VERSION, world_version=self.world_version, steps=list(self.history))


def _failed_step(index: int, refs: list[str], error: str, why: str = "no action: the policy failed") -> Step:
    return Step(
        index=index, context_refs=refs, request=ActionRequest(tool=NO_ACTION),
        executed=ExecutedAction(tool=NO_ACTION, allowed=False, denied_reason=why,
                                status=ActionStatus.error),
        effect=Effect(observation=f"error: {error}", error=error),
    )


def _diverged(episode_id: str, where: str, recorded: str, replayed: str) -> WorldError:
    return WorldError(
        f"cannot resume {episode_id}: the rebuilt world diverged at {where} (recorded {recorded[:80]!r}, "
        f"replayed {replayed[:80]!r}); the world is not deterministic under its seed, run check_world on it"
    )


def run_episode(
    small_world: SmallWorld,
    policy: Policy,
    context_builder: ContextBuilder | None = None,
    limits: Limits | None = None,
    *,
    store: Store | None = None,
    world: ToolWorld | None = None,
    world_options: Mapping[str, JsonValue] | None = None,
    record_timings: bool = True,
    assess: Assessor | None = None,
    **kwargs: Any,
) -> Experience:
    """Run one episode to its stop; with `store`, commit each step as it happens and the experience at the end.

    `world` is a ready instance (else one is built from the registry with `world_options`);
    `limits` overrides the small world's. The experience's outcome stays `unknown`: the world's own
    reward and success are on the steps as `Feedback(kind="reward")`, the stop as `kind="stop"`.
    """
    recorder = StoreRecorder(store, assess=assess) if store is not None else NullRecorder(assess=assess)
    return Episode(small_world, policy, context_builder, limits, recorder=recorder, world=world,
                   world_options=world_options, record_timings=record_timings, **kwargs).run()
