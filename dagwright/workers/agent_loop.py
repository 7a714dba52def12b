"""The agent loop of LLM worker types: Messages API tool use, checkpointed at every step.

One turn: check the limits, call the model, checkpoint its response together with the
call's usage (one fenced write), then answer its tool calls one by one, checkpointing
after each. A node redelivered after its worker died resumes from the last checkpoint:
no LLM call that returned is made again, no tool that answered is called again.

Each ``stop_reason`` has its handling (``_STOP_REASONS``): ``max_tokens`` continues a cut
text answer (the cut text stays, a user turn asks for the rest: the newer models refuse an
assistant prefill) and drops a cut tool call, never run, making the turn once more with
twice the ``max_tokens`` (up to ``llm_max_tokens_cap`` and the model's limit), then fails
naming what the cut answers spent; ``pause_turn`` sends the paused turn back so it goes
on; ``refusal`` makes the turn again with the fallback model, if any;
``model_context_window_exceeded`` fails; an empty answer gets one nudge. No request
carries an empty message or text block, and thinking blocks go back as they came.

Context that lasts (``agent_context.py``): on the models that take it, every request asks
the API to clear older tool results past ``agent_context_trigger_tokens``, a batch at a
time so the cleared prefix stays cached; the checkpoint keeps the whole conversation. On
others, older turns are replaced by a summary the model writes in one bounded call,
checked against the budgets and checkpointed like any other, so a resumed node repeats
neither it nor any call before it. Budgets count the calls' tokens as billed
(``budgets.py``) and estimate the next call as the model will read it.

The loop ends with a final answer (text, or the input of a ``final_answer`` tool checked
against the type's output model), or with a distinct error: AgentMaxTurnsError,
AgentToolErrorsError (too many failed tool calls in a row), BudgetExceededError (the
next call could pass the node's or the run's budget: it is not made), AgentOutputError
(no usable answer).

The system prompt is the type's, then a block every node of the run is sent alike
(``agent_prompt.run_system``): today's date and the submitter's goal and context, as
instructions. The first message is the node's data, then its instruction
(``agent_prompt.py``): a model-written goal as background, what the caller adds, and the
outputs of the dependencies, each in a block of untrusted data whose tags the data cannot
forge (``untrusted.py``); results of tools that carry outside content come delimited the
same way. The run's block and the tags' token are kept in the checkpoint (the token is
derived from the run), so every attempt of a node sends the same prompt.

What a node is offered (``agent_tools``): its own ``tools`` or its type's, as the settings
make them (``http_get`` only with allowed domains; the API's server-side ``web_search`` /
``web_fetch`` only when turned on). A server tool's ``server_tool_use`` and result blocks
are part of the assistant's turn: kept in it unchanged, never answered as our tool calls.
A call a tool refuses (a domain not allowed, a bad path) still counts toward
``max_tool_errors``: with no tool offered that can only refuse, a refusal is a mistake
the model was told how to correct, and repeating it is being stuck.

A node's ``model``, ``max_tokens`` and ``output_schema`` (the answer validated by
``jsonschema`` through the result tool, ``agent_answers``) override its type's. The
types' ``max_tokens`` and ``effort`` are sized for models that think by default
(``builtin_agents.THINKING_ROOM``); effort goes only to models that take it.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Sequence
from datetime import UTC, date, datetime
from typing import Any

from dagwright.errors import (
    AgentMaxTurnsError,
    AgentOutputError,
    AgentToolErrorsError,
    BatchWaitExpiredError,
    LLMBatchPendingError,
    NodeLostError,
    PermanentError,
    ToolPolicyError,
)
from dagwright.llm.batches import BatchFailed, MessageBatches, PendingBatch, custom_id_of
from dagwright.llm.messages_api_rules import max_output_tokens
from dagwright.llm.model_ids import price_of
from dagwright.llm.protocol import LLMRequest, LLMResponse, rough_tokens
from dagwright.llm.server_tools import WEB_SEARCH
from dagwright.models import Budget, Node
from dagwright.redaction import known_secrets, redact
from dagwright.shown_ids import shown_id
from dagwright.workers.agent_answers import answer_contract
from dagwright.workers.agent_context import (
    SUMMARY_SYSTEM,
    ContextKeeper,
    summarised,
    summary_request_text,
    tokens_of,
)
from dagwright.workers.agent_prompt import (
    DataGroup,
    background_group,
    final_answer_schema,
    first_message,
    inputs_group,
    run_system,
)
from dagwright.workers.agent_skills import equip_skills
from dagwright.workers.agent_spec import FINAL_ANSWER_TOOL, AgentSpec
from dagwright.workers.agent_state import (
    AgentState,
    add_assistant_turn,
    add_user_text,
    resume_state,
    sendable,
)
from dagwright.workers.agent_tool_calls import ToolCaller
from dagwright.workers.agent_tools import offered_tools, unregistered
from dagwright.workers.budgets import Dimension, find_overrun, next_call_input_tokens, worst_case
from dagwright.workers.context import NodeContext, RunBackground
from dagwright.workers.tools.base import (
    DEFAULT_MAX_OUTPUT_CHARS,
    ToolOutcome,
    ToolRegistry,
    redacted_output,
    truncate,
)
from dagwright.workers.tools.policy import ToolPolicy
from dagwright.workers.untrusted import DataFence

__all__ = [
    "FINAL_ANSWER_TOOL",
    "AgentSpec",
    "AgentState",
    "DataGroup",
    "ToolPolicy",
    "final_answer_schema",
    "first_message",
    "run_agent",
]

log = logging.getLogger(__name__)

NO_TOOL_OUTPUT = "(the tool returned nothing)"  # the API refuses an empty tool_result text
LAST_TOOL_ERROR_CHARS = 500  # of the last failed call, in the node's error
# Said once after an empty answer. The API's docs: an empty end_turn mostly follows tool
# results, and sending the conversation back unchanged gets the same empty answer.
NUDGE = "Your last turn ended without any answer. Continue the task and give your answer now."
# Said after a text answer cut at max_tokens, which stays in the conversation.
CONTINUE = (
    "Your answer was cut off at the max_tokens limit. Continue it exactly where it stopped, "
    "without repeating anything already written."
)
MAX_CONTINUATIONS = 3  # of one answer; a longer one fails as cut


def run_agent(
    ctx: NodeContext,
    node: Node,
    spec: AgentSpec,
    tools: ToolRegistry,
    *,
    data: Sequence[DataGroup] = (),
    background: bool = True,
) -> Any:
    """Run (or resume) the agent loop of ``node``; return its final answer. ``data``:
    more untrusted data for the first message, before the inputs; ``background``: show
    the run's goal and context (the planner has them in its instruction). The node's
    own ``model``, ``max_tokens``, ``tools``, ``skills`` and ``output_schema`` win over its
    type's; its skills' catalog joins the type's prompt (``agent_skills.py``)."""
    model = node.model or spec.model or ctx.settings.llm.default_model
    spec, tools, skill_versions = equip_skills(ctx, node, spec, tools)
    loop = AgentLoop(ctx, node, spec, tools, model, data=data, background=background)
    if not loop.state.skills:
        loop.state.skills = skill_versions  # pinned by the first checkpoint
    return loop.run()


class AgentLoop:
    def __init__(
        self,
        ctx: NodeContext,
        node: Node,
        spec: AgentSpec,
        tools: ToolRegistry,
        model: str,
        *,
        data: Sequence[DataGroup] = (),
        background: bool = True,
    ) -> None:
        self.ctx = ctx
        self.spec = spec
        self.tools = tools
        self.model = model
        self.node = node
        self.tool_names = tuple(spec.tools if node.tools is None else node.tools)
        self.offered = offered_tools(self.tool_names, tools, ctx.settings)
        self.contract = answer_contract(spec, node)
        self.keeper = ContextKeeper(ctx.settings)
        # Every text entering the conversation is redacted where it enters (the first
        # message, tool results): the requests and the checkpoints are built from it.
        self.secrets = known_secrets(ctx.settings)
        self.state = resume_state(ctx.last_checkpoint) or self._new_state(data, background)
        if not self.state.data_fence:  # a checkpoint from before fences
            self.state.data_fence = DataFence.random().token
        if self.state.run_system is None:  # from before it: the first message has the goal
            self.state.run_system = run_system(RunBackground(), today(), submitter=False)
        self.fence = DataFence(self.state.data_fence)
        client_tools = tuple(tool.name for tool in self.offered if not tool.runs_on_server)
        self.tool_caller = ToolCaller(ctx, spec, tools, self.fence, client_tools)

    def _new_state(self, data: Sequence[DataGroup], background: bool) -> AgentState:
        """The conversation's start: the run's system block and the first message (secrets
        masked) and its fence. The run's background is read here, once per node: a
        resumed node has all three. ``background``: the submitter's goal and context go
        into the system block (a model-written goal into the first message, fenced)."""
        run = self.ctx.run_background()
        fence = DataFence.for_node(run.nonce, self.ctx.node_id)
        groups = [background_group(run)] if background else []
        groups += [*data, inputs_group(self.ctx.inputs)]
        message = first_message(
            self.node.instruction or "",
            fence,
            groups,
            tool_results_delimited=self._delimits_tool_results,
        )
        content = redact(message, self.secrets)
        return AgentState(
            messages=[{"role": "user", "content": content}],
            data_fence=fence.token,
            run_system=redact(run_system(run, today(), submitter=background), self.secrets),
        )

    @property
    def _delimits_tool_results(self) -> bool:
        found = (self.tools.get(name) for name in self.tool_names)
        return any(tool is not None and tool.carries_outside_content for tool in found)

    def run(self) -> Any:
        while True:
            if self.ctx.cancelled:
                raise NodeLostError("stopped: the node was cancelled or taken over")
            if self.state.pending:
                self._answer_next_tool_call()
            elif self.state.done:
                return self.state.output
            else:
                self._take_turn()

    # -- one LLM call ---------------------------------------------------------------

    def _take_turn(self) -> None:
        if self.state.batch is None:  # a call waiting in a batch was checked when sent
            split = self.keeper.summary_split(
                self._model, self.state.messages, self.state.last_call_tokens
            )
            if split is not None:
                self._summarise(split)
                return
            self._check_limits()
        request = self._request()
        response = self._batched(request) if self._uses_batch else self.ctx.llm().complete(request)
        problem = self._absorb(response)
        self.ctx.record_llm_call(response, self._snapshot())  # paid for: saved before all else
        if problem is not None:
            raise problem

    @property
    def _model(self) -> str:
        return self.state.model or self.model

    @property
    def _max_tokens(self) -> int:
        """The node's, else the type's, raised after a cut tool call; never more than the
        model may write in one answer."""
        wanted = self.state.max_tokens or self.node.max_tokens or self.spec.max_tokens
        return min(wanted, max_output_tokens(self._model))

    def _check_limits(self) -> None:
        state, spec = self.state, self.spec
        if state.turn >= spec.max_turns:
            raise AgentMaxTurnsError(
                f"no final answer after {state.turn} turns (max_turns of {spec.name!r})"
            )
        self._check_budgets()

    def _check_budgets(self, request: LLMRequest | None = None) -> None:
        """Refuse the next call (``request``, default the next turn's) if its worst case
        could pass the node's budget or the run's; the run's is held for it (reserved)
        when it fits."""
        price = price_of(self._model, self.ctx.settings.llm.model_prices)
        request = request or self._request()
        input_tokens = next_call_input_tokens(
            request, self._estimate_as_read(request), self.state.last_call_tokens
        )
        call = worst_case(
            input_tokens,
            request.max_tokens,
            price,
            searches=self._most_searches,
            search_usd_per_1k=self.ctx.settings.llm.web_search_usd_per_1k,
        )
        overrun = find_overrun(
            node_budget(self.node, self.spec),
            self.state.usage,
            call,
            scope=f"node {self.node.id!r}",
            hint=self._node_hint,
        ) or self.ctx.services.reserve_llm_call(self.ctx, call)
        if overrun is not None:
            raise overrun.error()

    def _estimate_as_read(self, request: LLMRequest) -> int:
        """The input tokens of ``request`` as the model will read them: less what the
        API's context edits will clear from it."""
        whole = self.ctx.services.estimate_input_tokens(self.ctx, request)
        if request.context_management is None:
            return whole
        read = self.keeper.as_read(request.messages, request.context_management, whole)
        return max(whole - (tokens_of(request.messages) - tokens_of(read)), 1)

    def _summarise(self, split: int) -> None:
        """Replace the turns before ``split`` by a summary the model writes (one bounded
        call, checked against the budgets), saved with the call like any other."""
        settings = self.ctx.settings
        request = LLMRequest(
            model=self._model,
            system=SUMMARY_SYSTEM,
            messages=[
                {
                    "role": "user",
                    "content": summary_request_text(self.state.messages, split, self.fence),
                }
            ],
            max_tokens=settings.agent_context.summary_max_tokens,
            volatile_token=self.fence.token,
        )
        self._check_budgets(request)
        response = self.ctx.llm().complete(request)
        state = self.state
        state.usage = state.usage.plus(response.usage)
        summary = redact(response.text().strip(), self.secrets)
        if summary:
            state.messages = summarised(state.messages, split, summary)
            state.summaries += 1
        # What the next call will read, about: it must not look due for a summary again.
        state.last_call_tokens = rough_tokens(json.dumps(state.messages))
        self.ctx.record_llm_call(response, self._snapshot())
        if not summary:
            raise AgentOutputError(
                f"the model ({self._model}) wrote no summary of the conversation, which "
                f"passed agent_context_trigger_tokens ({settings.agent_context.trigger_tokens})"
            )

    def _node_hint(self, dimension: Dimension) -> str:
        hint = f"raise the node's budget.{dimension.limit} in the plan"
        own = self.node.budget and getattr(self.node.budget, dimension.limit)
        if dimension.limit == "max_total_tokens" and not own:
            hint += f" (unset: the token_budget of {self.spec.name!r})"
        return hint

    @property
    def _most_searches(self) -> int:
        """The web searches one call may make (each billed): its ``max_uses``."""
        search = next((t for t in self.offered if t.name == WEB_SEARCH and t.runs_on_server), None)
        return int(search.definition.get("max_uses", 0)) if search is not None else 0

    def _request(self) -> LLMRequest:
        spec, settings = self.spec, self.ctx.settings
        self._check_tools_registered()
        schemas = [tool.definition for tool in self.offered]
        if self.contract is not None:
            schemas.append(self.contract.definition)
        ttl = settings.llm.prompt_cache_ttl
        return LLMRequest(
            model=self._model,
            system=spec.system_prompt,
            run_system=self.state.run_system,
            messages=self.state.messages,
            tools=schemas,
            max_tokens=self._max_tokens,
            temperature=spec.temperature,
            thinking=spec.thinking,
            effort=spec.effort,
            context_management=self.keeper.request_config(self._model, self.state.messages),
            prompt_cache_ttl=None if ttl == "off" else ttl,
            # A node offered tools may take another turn, which reads this one's prefix
            # back; with none (or only its answer tool) it has one turn, and nothing to read.
            cache_conversation=bool(self.offered),
            response_cache=self._uses_response_cache,
            volatile_token=self.fence.token,
        )

    @property
    def _uses_response_cache(self) -> bool:
        """Asked for by the agent type, by the run (its submitter), or for every agent."""
        return (
            self.spec.response_cache
            or self.ctx.response_cache
            or self.ctx.settings.llm.cache_enabled
        )

    @property
    def _uses_batch(self) -> bool:
        """Asked for by the run (its submitter or schedule) or for the agent type."""
        return self.ctx.llm_batch or self.spec.name in self.ctx.settings.llm.batch_types

    def _batched(self, request: LLMRequest) -> LLMResponse:
        """The call, through a Message Batch of one: sent once (the pending batch is
        checkpointed before anything else), then polled; LLMBatchPendingError parks the
        node while the batch processes. A batch that did not answer is forgotten before
        its error is raised, so the node's next attempt sends the call again; one that
        could not be read (an outage) is kept, to be polled again."""
        batches = self.ctx.llm_batches()
        if self.state.batch is None:
            custom_id = custom_id_of(self.ctx.run_id, self.ctx.node_id, self.state.turn)
            self.state.batch = batches.submit(request, custom_id)
            self.ctx.checkpoint(self._snapshot())
        pending = self.state.batch
        answer = batches.answer(pending, request)  # an outage to read it keeps the batch
        if answer is None:
            raise self._still_waiting(pending, batches)
        self.state.batch = None  # saved with the call's usage (record_llm_call), or now:
        if isinstance(answer, BatchFailed):
            self.ctx.checkpoint(self._snapshot())
            raise answer.error
        return answer

    def _still_waiting(self, pending: PendingBatch, batches: MessageBatches) -> Exception:
        """The node waits for its batch, unless it has waited ``llm_batch_max_wait_s``:
        the batch is then cancelled and the node fails for good."""
        settings = self.ctx.settings.llm
        waited_s = time.time() - pending.submitted_at
        if waited_s < settings.batch_max_wait_s:
            return LLMBatchPendingError(pending.id, settings.batch_poll_s, pending.submitted_at)
        batches.cancel(pending.id)
        self.state.batch = None
        self.ctx.checkpoint(self._snapshot())
        return BatchWaitExpiredError(
            f"Message Batch {pending.id} did not answer within {settings.batch_max_wait_s:g} s "
            "(DAGWRIGHT_LLM_BATCH_MAX_WAIT_S): cancelled; replay the node to send the call again"
        )

    def _check_tools_registered(self) -> None:
        missing = unregistered(self.tool_names, self.tools)
        if missing:
            raise PermanentError(
                f"tool(s) {', '.join(missing)} of {self.spec.name!r} are not registered in this "
                "worker: start it with --import naming the module that registers them"
            )

    # -- what a response means, by its stop_reason ----------------------------------

    def _absorb(self, response: LLMResponse) -> Exception | None:
        """Fold a response into the state; the error to raise once it is saved, if any."""
        state = self.state
        state.turn += 1
        state.usage = state.usage.plus(response.usage)
        state.last_call_tokens = response.usage.total_tokens
        log_llm_call(state.turn, response)
        handle = self._STOP_REASONS.get(response.stop_reason, AgentLoop._answered)
        return handle(self, response)

    def _answered(self, response: LLMResponse) -> Exception | None:
        """``end_turn``, ``tool_use``, ``stop_sequence``: an answer, tool calls, or nothing."""
        content = sendable(response.content)
        if not any(block.get("type") in ("text", "tool_use") for block in content):
            if content:  # server tools ran (paid for, and read again): kept in the turn
                add_assistant_turn(self.state, content)
            return self._empty_answer()
        add_assistant_turn(self.state, content)
        self.state.cut_retried = False
        # Only tool_use is ours to run: a server_tool_use was run by the API, and its
        # result is already in the content, which goes back as it came.
        calls = [block for block in content if block.get("type") == "tool_use"]
        if calls:  # a cut answer continued into tool calls was not the final answer
            self.state.cut_text = ""
        if self._accept_final_answer(calls):
            return None
        if calls:
            self.state.pending = calls
            return None
        if self.contract is not None:
            add_user_text(self.state, f"Give your result by calling {self.contract.tool_name}.")
            self.state.tool_errors_in_a_row += 1
            return self._too_many_tool_errors()
        answer = self.state.cut_text + final_text(response.content)
        self.state.done, self.state.output = True, answer
        return None

    def _empty_answer(self) -> Exception | None:
        """Nothing said (content ``[]``, or thinking alone): nothing joins the conversation
        (the API refuses an empty turn), and the model is asked once more."""
        if self.state.nudged:
            return AgentOutputError(
                f"the model ({self._model}) gave no answer, even when asked again "
                f"({self.spec.name!r}, turn {self.state.turn})"
            )
        self.state.nudged = True
        add_user_text(self.state, NUDGE)
        return None

    def _cut_off(self, response: LLMResponse) -> Exception | None:
        """``max_tokens``: the answer stopped mid-way. A text answer is kept and continued:
        the cut text joins the conversation and the model is asked to go on from it (a
        user turn; an assistant prefill is refused by the newer models), up to
        ``MAX_CONTINUATIONS`` times. A cut tool call (its input half-written) or cut
        thinking cannot be sent back: nothing of it is kept or run, and the turn is made
        once more with twice the room (up to ``llm_max_tokens_cap``); cut again, it fails."""
        state = self.state
        state.cut_output_tokens += response.usage.output_tokens
        content = sendable(response.content)
        if continuable(content) and state.continuations < MAX_CONTINUATIONS:
            add_assistant_turn(state, content)
            add_user_text(state, CONTINUE)
            state.continuations += 1
            state.cut_text += final_text(content)
            return None
        return self._more_room()

    def _more_room(self) -> Exception | None:
        """The cut turn made once more with twice the ``max_tokens``; None if it may be."""
        cap = min(self.ctx.settings.llm.max_tokens_cap, max_output_tokens(self._model))
        if self.state.cut_retried or self._max_tokens >= cap:
            why = (
                "even after one retry with twice the room"
                if self.state.cut_retried
                else f"which llm_max_tokens_cap ({cap}) does not let grow"
            )
            return AgentOutputError(
                f"the answer was cut at max_tokens ({self._max_tokens}) of {self.spec.name!r} "
                f"{why} ({self.state.cut_output_tokens:,} output tokens spent on cut "
                "answers): raise the type's or node's max_tokens, or ask for less in one turn"
            )
        self.state.max_tokens = min(self._max_tokens * 2, cap)
        self.state.cut_retried = True
        return None

    def _paused(self, response: LLMResponse) -> Exception | None:
        """``pause_turn``: a long server-side step stopped half-way; sent back as it is, it
        goes on."""
        content = sendable(response.content)
        if content:
            add_assistant_turn(self.state, content)
        return None

    def _refused(self, response: LLMResponse) -> Exception | None:
        """``refusal``: the turn is made again with the fallback model, if one is set and
        not the one that refused; the refused answer is dropped."""
        fallback = self.spec.fallback_model or self.ctx.settings.llm.refusal_fallback_model
        if fallback is None or fallback == self._model:
            hint = "" if fallback else " (no fallback: set llm_refusal_fallback_model)"
            return AgentOutputError(f"the model ({self._model}) refused to answer{hint}")
        log.info("%s refused; %s takes the turn again", self._model, fallback)
        self.state.model = fallback
        return None

    def _context_full(self, response: LLMResponse) -> Exception | None:
        return AgentOutputError(
            f"the conversation filled the context window of {self._model} after "
            f"{self.state.turn} turns of {self.spec.name!r}: give the node less input, or "
            "split the task"
        )

    _STOP_REASONS: dict[str, Callable[[AgentLoop, LLMResponse], Exception | None]] = {
        "max_tokens": _cut_off,
        "pause_turn": _paused,
        "refusal": _refused,
        "model_context_window_exceeded": _context_full,
    }

    def _accept_final_answer(self, calls: list[dict[str, Any]]) -> bool:
        if self.contract is None:
            return False
        for call in calls:
            if call.get("name") != self.contract.tool_name:
                continue
            output, problems = self.contract.check(call.get("input") or {})
            if output is not None and not problems:
                self.state.done, self.state.output = True, output
                return True
            # otherwise answered as a failed tool call, so the model can correct it
        return False

    # -- one tool call --------------------------------------------------------------

    def _answer_next_tool_call(self) -> None:
        state = self.state
        call = state.pending[len(state.results)]
        outcome = self._call_tool(call.get("name", ""), call.get("input") or {}, call["id"])
        log_tool_call(call.get("name", ""), outcome)
        state.results.append(
            {
                "type": "tool_result",
                "tool_use_id": call["id"],
                "content": outcome.text or NO_TOOL_OUTPUT,
                "is_error": outcome.is_error,
            }
        )
        state.tool_errors_in_a_row = state.tool_errors_in_a_row + 1 if outcome.is_error else 0
        if len(state.results) == len(state.pending):
            state.messages.append({"role": "user", "content": state.results})
            state.pending, state.results = [], []
        self.ctx.checkpoint(self._snapshot())
        problem = self._too_many_tool_errors(outcome)
        if problem is not None:
            raise problem

    def _call_tool(self, name: str, args: dict[str, Any], call_id: str) -> ToolOutcome:
        """The call's outcome, its text redacted (by the ToolCaller for tools)."""
        if self.contract is not None and name == self.contract.tool_name:
            return self._reject_final_answer(args)
        return self.tool_caller.call(name, args, call_id, self._reasoning)

    def _reasoning(self) -> str:
        """What the model said in the turn that asked for the tool call."""
        last = self.state.messages[-1] if self.state.messages else {}
        content = last.get("content") if last.get("role") == "assistant" else None
        if not isinstance(content, list):
            return content if isinstance(content, str) else ""
        return "\n".join(block.get("text", "") for block in content if block.get("type") == "text")

    def _reject_final_answer(self, args: dict[str, Any]) -> ToolOutcome:
        assert self.contract is not None
        _, problems = self.contract.check(args)
        if problems:  # check_output is the user's code: it may quote anything
            rejection = "rejected: " + "; ".join(problems)
            return ToolOutcome(
                redacted_output(rejection, DEFAULT_MAX_OUTPUT_CHARS, self.secrets), True
            )
        return ToolOutcome("accepted", is_error=False)

    def _too_many_tool_errors(self, last: ToolOutcome | None = None) -> Exception | None:
        if self.state.tool_errors_in_a_row < self.spec.max_tool_errors:
            return None
        message = (
            f"{self.state.tool_errors_in_a_row} tool calls in a row failed "
            f"(max_tool_errors of {self.spec.name!r})"
        )
        if last is None:
            return AgentToolErrorsError(message)
        # What the last call said is the operator's first clue (redacted, as the model saw it).
        message = f"{message}; the last: {truncate(last.text, LAST_TOOL_ERROR_CHARS)}"
        # Refused by the policy: what must change is the policy, not the model's next try.
        if last.refused_by_policy:
            return ToolPolicyError(message)
        return AgentToolErrorsError(message)

    def _snapshot(self) -> dict[str, Any]:
        return self.state.model_dump(mode="json")


def log_llm_call(turn: int, response: LLMResponse) -> None:
    """The call, as the node's logs show it (telemetry/node_logs.py): model, tokens and
    stop reason; never the prompt or the answer."""
    usage = response.usage
    log.info(
        "LLM call %d done: %s, %d input + %d output tokens%s, stop_reason %s",
        turn,
        response.model,
        usage.input_tokens,
        usage.output_tokens,
        f" ({usage.cache_read_input_tokens} read from cache)"
        if usage.cache_read_input_tokens
        else "",
        response.stop_reason,
    )


def log_tool_call(name: str, outcome: ToolOutcome) -> None:
    """A tool call's outcome, as the node's logs show it: its name and how it went."""
    if outcome.refused_by_policy:
        how = "refused by the tool policy"
    elif outcome.refused_by_tool:
        how = "refused by the tool"
    else:
        how = "failed" if outcome.is_error else "ok"
    log.info("tool call %s: %s", shown_id(name), how)


def continuable(content: list[dict[str, Any]]) -> bool:
    """Whether a cut answer can be sent back and continued: it ends in text, and holds
    no tool call (whose input was cut) nor cut thinking."""
    calls = any(block.get("type") in ("tool_use", "server_tool_use") for block in content)
    return bool(content) and content[-1].get("type") == "text" and not calls


def final_text(content: list[dict[str, Any]]) -> str:
    """The answer's text, with the sources it cites listed after it: a web search's
    citations are metadata of the text blocks, which a plain-text output would lose."""
    blocks = [block for block in content if block.get("type") == "text"]
    text = "".join(str(block.get("text", "")) for block in blocks)
    sources = cited_sources(blocks)
    if not sources:
        return text
    return text.rstrip() + "\n\nSources:\n" + "\n".join(f"- {source}" for source in sources)


def cited_sources(blocks: list[dict[str, Any]]) -> list[str]:
    """``Title <url>`` of every page the text blocks cite, once each, in order."""
    seen: dict[str, str] = {}
    for block in blocks:
        for citation in block.get("citations") or []:
            url = citation.get("url")
            if url and url not in seen:
                title = citation.get("title")
                seen[url] = f"{title} <{url}>" if title else url
    return list(seen.values())


def today() -> date:
    """Today's date (UTC), as every agent is told it."""
    return datetime.now(UTC).date()


def node_budget(node: Node, spec: AgentSpec) -> Budget:
    """The node's budget: its own limits, else its type's (``token_budget``: all tokens)."""
    return Budget(max_total_tokens=spec.token_budget).overridden_by(node.budget)
