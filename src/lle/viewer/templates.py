"""Jinja2 templates of the viewer's pages, kept in Python so they ship with the package as code.

Autoescaped: every value from the store is text, never HTML. Minimal CSS (`lle.flywheel.report.CSS`),
no script: each page is a plain document, readable offline and in a text browser.
"""

from __future__ import annotations

BASE = """<!doctype html>
<html><head><meta charset="utf-8"><title>{{ title }}</title><style>{{ css }}</style></head><body>
<nav><a href="{{ links.home() }}">runs</a>
{% block nav %}{% endblock %}</nav>
<h1>{{ title }}</h1>
{% block body %}{% endblock %}
</body></html>
"""

STORE_NAV = """{% extends "base.html" %}
{% block nav %}
{% if src.run != "workspace" %}<a href="{{ links.run(src.run) }}">run {{ src.run }}</a>{% endif %}
<a href="{{ links.episodes(src.run, src.strategy) }}">episodes</a>
<a href="{{ links.carriers(src.run, src.strategy) }}">carriers</a>
<span class="muted">store: {{ src.strategy }}</span>
{% endblock %}
"""

RUNS = """{% extends "base.html" %}
{% block body %}
{% if workspace_store %}<p>The workspace's own store:
<a href="{{ links.episodes('workspace', 'main') }}">episodes</a>,
<a href="{{ links.carriers('workspace', 'main') }}">carriers</a>.</p>{% endif %}
{% if not runs %}<p>No runs yet: start one with <code>lle run --quick</code>.</p>{% endif %}
{% if runs | length > 1 and not links.static %}<form method="get" action="/compare" class="compare"><p>Compare
<select name="a">{% for r in runs %}<option{% if loop.index == 2 %} selected{% endif %}>{{ r.id }}</option>{% endfor %}
</select> with <select name="b">{% for r in runs %}<option>{{ r.id }}</option>{% endfor %}</select>
<button type="submit">compare</button></p></form>{% endif %}
{% for r in runs %}
<div class="run"><h2><a href="{{ links.run(r.id) }}">{{ r.id }}</a></h2>
<p>suite {{ r.suite }}, model {{ r.model }}, strategies {{ r.strategies | join(", ") }}, {{ r.rounds }} rounds;
{% if r.finished_at %}finished {{ r.finished_at[:19] }}{% else %}<b>not finished</b> (running, or resume with
<code>lle run --resume {{ r.id }}</code>){% endif %}</p>
{% if r.svg %}<figure>{{ r.svg }}</figure>{% endif %}
<ul>{% for s in r.sentences %}<li>{{ s }}</li>{% endfor %}</ul></div>
{% endfor %}
{% endblock %}
"""

RUN = """{% extends "base.html" %}
{% block body %}
<p>Stores: {% for s in strategies %}<b>{{ s }}</b> (<a href="{{ links.episodes(run, s) }}">episodes</a>,
<a href="{{ links.carriers(run, s) }}">carriers</a>){% if not loop.last %}; {% endif %}{% endfor %}</p>
{% if progress is not none %}<h2>In progress</h2><p>This run has not finished (running, or killed: resume it with
<code>lle run --resume {{ run }}</code>). {{ eta.done }} of {{ eta.planned }} planned episodes finished in
{{ (eta.elapsed_s / 60) | round(1) }} min{% if eta.left_s is not none %}; about {{ (eta.left_s / 60) | round(1) }} min
left at this pace{% endif %} (skill and recipe replays add episodes). Finished episodes per batch so far (reload to
update):</p>
<table><tr><th>strategy</th><th>batch</th><th>episodes</th></tr>
{% for s, batches in progress.items() %}{% for b, n in batches.items() %}
<tr><td>{{ s }}</td><td>{{ b }}</td><td>{{ n }}</td></tr>{% endfor %}{% endfor %}</table>{% endif %}
{{ sections }}
{{ extra }}
{% endblock %}
"""

EPISODES = """{% extends "store.html" %}
{% block body %}
<table><tr><th>episode</th><th>small world</th><th>round</th><th>phase</th><th>outcome</th><th>verification</th>
<th>steps</th></tr>
{% for r in rows %}<tr{% if r.revoked %} class="revoked"{% endif %}>
<td class="id"><a href="{{ links.episode(src.run, src.strategy, r.id) }}">{{ r.id }}</a></td>
<td class="id">{{ r.small_world }}</td><td>{{ r.round }}</td><td>{{ r.phase }}</td>
<td class="{{ 'good' if r.outcome == 'pass' else 'bad' }}">{{ r.outcome }}{% if r.revoked %} (revoked){% endif %}</td>
<td>{{ r.verification }}</td><td>{{ r.steps }}</td></tr>
{% endfor %}</table>
{% if not rows %}<p>No episodes in this store.</p>{% endif %}
{% endblock %}
"""

EPISODE = """{% extends "store.html" %}
{% block body %}
{% set sw = exp.small_world %}
{% if t.revoked %}<p class="bad"><b>REVOKED</b>: this episode is excluded from every carrier.</p>{% endif %}
<dl>
<dt>task</dt><dd class="id">{{ sw.id }} ({{ sw.world }}, project {{ sw.project }}, {{ sw.split }})</dd>
<dt>goal</dt><dd>{{ sw.goal }}</dd>
<dt>policy</dt><dd>{{ exp.policy.model }}</dd>
<dt>batch</dt><dd>{{ t.batch | dash }}</dd>
<dt>outcome</dt><dd class="{{ 'good' if exp.outcome == 'pass' else 'bad' }}">{{ exp.outcome }}
({{ exp.verification }}), score {{ exp.score | dash }}</dd>
<dt>risk</dt><dd>{{ exp.risk_tags | join(", ") | dash }}</dd>
{% if exp.attribution %}<dt>attributed</dt><dd>{{ exp.attribution.get("kind") }}:
{{ exp.attribution.get("reason") }}</dd>{% endif %}
</dl>
<h2>Steps</h2>
{% for v in t.steps %}{% set s = v.step %}
<div class="step{% if not s.executed.allowed %} denied{% endif %}" id="step-{{ s.index }}">
<h3>step {{ s.index }}{% if v.credit is not none %} <span class="muted">credit {{ "%+.2f" | format(v.credit) }}</span>
{% endif %}</h3>
<details><summary>what the model saw</summary>
{% if v.prompt %}<pre class="prompt">{{ v.prompt }}</pre>{% else %}<p class="muted">prompt not stored (a scripted
step, or a recording made before prompts were kept: the context items shown are below)</p>{% endif %}
{% if s.context_refs %}<p>carrier items shown: {% for ref in s.context_refs %}
<a class="id" href="{{ links.item(src.run, src.strategy, ref) }}">{{ ref }}</a> {% endfor %}</p>{% endif %}
{% if s.llm %}<p class="muted">{{ s.llm.model }}: {{ s.llm.prompt_tokens }} prompt tokens,
{{ s.llm.completion_tokens }} generated, {{ "%.0f" | format(s.llm.latency_ms) }} ms</p>{% endif %}
</details>
{% for text in v.interventions %}<p><b>runtime</b> {{ text }}</p>{% endfor %}
<dl>
<dt>thought</dt><dd>{{ s.request.thought | dash }}{% if v.thought_is_placeholder %}
<span class="bad">(copies the prompt's placeholder: not the model's plan)</span>{% endif %}</dd>
<dt>requested</dt><dd><code>{{ s.request.tool }} {{ s.request.args | tojson }}</code></dd>
{% if s.request.expect %}<dt>expected</dt><dd>{{ s.request.expect }}{% if v.expect_is_placeholder %}
<span class="bad">(copies the prompt's placeholder: not a prediction)</span>{% endif %}</dd>{% endif %}
<dt>executed</dt><dd>{% if not s.executed.allowed %}<span class="bad">DENIED</span>: {{ s.executed.denied_reason }}
{% elif s.executed.status == "not_reported" %}<span class="bad">not reported</span>: no result was reported by the
client, so whether it ran is unknown
{% elif v.executed_differs %}<code>{{ s.executed.tool }} {{ s.executed.args | tojson }}</code> ({{ s.executed.status }})
{% else %}as requested ({{ s.executed.status }}, {{ "%.1f" | format(s.executed.duration_ms) }} ms){% endif %}</dd>
<dt>effect</dt><dd><pre>{{ s.effect.observation | dash }}</pre>
{% for ch in s.effect.changes %}<div><code>{{ ch.kind }} {{ ch.target }}: {{ ch.before | tojson }} →
{{ ch.after | tojson }}</code></div>{% endfor %}</dd>
{% if s.effect.error %}<dt>error</dt><dd class="bad">{{ s.effect.error }}</dd>{% endif %}
{% if v.world %}<dt>world</dt><dd>{{ v.world }}</dd>{% endif %}
{% if v.stop %}<dt>stop</dt><dd>{{ v.stop }}</dd>{% endif %}
{% for ev in v.evidence %}<dt>evidence</dt><dd class="evidence">{{ ev.anchor }}: {{ ev.outcome }} ({{ ev.strength }})
{{ ev.risk_tags | join(", ") }} {{ (ev.detail.get("reason", "") if ev.detail is mapping else "") }}</dd>{% endfor %}
</dl></div>
{% endfor %}
<h2>Evidence</h2>
<table class="evidence"><tr><th>id</th><th>anchor</th><th>outcome</th><th>strength</th><th>about</th><th>risk</th>
<th>detail</th></tr>
{% for ev in t.episode_evidence + (t.steps | map(attribute="evidence") | sum(start=[])) %}
<tr><td class="id">{{ ev.id }}{% if ev.id in t.later %} (added later){% endif %}</td><td>{{ ev.anchor }}</td>
<td class="{{ 'good' if ev.outcome == 'pass' else 'bad' }}">{{ ev.outcome }}</td><td>{{ ev.strength }}</td>
<td>{% if ev.step is not none %}<a href="#step-{{ ev.step }}">step {{ ev.step }}</a>{% else %}episode{% endif %}</td>
<td>{{ ev.risk_tags | join(", ") | dash }}</td>
<td><details><summary>{{ (ev.detail.get("reason") if ev.detail is mapping else none) | dash }}</summary>
<pre>{{ ev.detail | tojson_pretty }}</pre></details></td></tr>
{% endfor %}</table>
<h2>Learned from this episode</h2>
{% if t.items %}<ul>{% for i in t.items %}<li><a class="id" href="{{ links.item(src.run, src.strategy, i.id) }}">{{ i.id
}}</a> {{ i.carrier }}</li>{% endfor %}</ul>{% else %}<p>Nothing in any carrier.</p>{% endif %}
{% if links.revoke(src.run, src.strategy, exp.id) %}<p><a href="{{ links.revoke(src.run, src.strategy, exp.id) }}">
revoke this episode…</a> (shows what would go with it first)</p>{% endif %}
{% endblock %}
"""

CARRIERS = """{% extends "store.html" %}
{% block body %}
{% if message %}<p class="good" id="message">{{ message }}</p>{% endif %}
<p>{% if show_all %}Every item, with its state.{% if not links.static %}
<a href="{{ links.carriers(src.run, src.strategy) }}">Only active</a>{% endif %}
{% else %}The active view (the ledger minus revocations).{% if not links.static %}
<a href="{{ links.carriers(src.run, src.strategy, True) }}">Show every item</a>{% endif %}{% endif %}</p>
{% for kind, rows in groups.items() %}
<h2 id="{{ kind }}">{{ titles[kind] }} ({{ rows | length }})</h2>
{% if rows %}<table class="carrier-{{ kind }}"><tr><th>id</th><th>state</th><th>scope</th><th>content</th>
<th>from</th></tr>
{% for r in rows %}<tr{% if r.state == "revoked" %} class="revoked"{% endif %}>
<td class="id"><a href="{{ links.item(src.run, src.strategy, r.item.id) }}">{{ r.item.id }}</a></td>
<td>{{ r.state }}</td><td>{{ r.item.scope.level }} {{ r.item.scope.family or "" }} {{ r.item.scope.project or "" }}</td>
<td>{{ r.summary }}{% if r.detail %}<ol>{% for d in r.detail %}<li><code>{{ d }}</code></li>{% endfor %}</ol>
{% endif %}</td><td>{{ r.item.experience_ids | length }} episodes</td></tr>
{% endfor %}</table>{% else %}<p class="muted">none</p>{% endif %}
{% endfor %}
{% endblock %}
"""

ITEM = """{% extends "store.html" %}
{% block body %}
<p>{{ item.carrier }}, state <b class="state">{{ p.state }}</b>{% if p.revoked_by %}
(<span class="bad">revoked through {{ p.revoked_by }}</span>){% endif %}; scope {{ item.scope.level }}
{{ item.scope.family or "" }} {{ item.scope.project or "" }}</p>
{% if p.steps %}<h2>Steps</h2><ol class="skill-steps">{% for s in p.steps %}<li><code>{{ s }}</code></li>{% endfor %}
</ol>{% endif %}
<h2>Content</h2><details{% if not p.steps %} open{% endif %}><summary>stored as JSON</summary>
<pre>{{ item.content | tojson_pretty }}</pre></details>
<h2>Provenance</h2>
<p>experience → evidence → update (the gate and its reasons) → this item → items derived from it.</p>
<table class="provenance"><tr><th>experiences</th><th>evidence</th><th>updates</th><th>item</th><th>derived</th></tr>
<tr><td>{% for id, world, outcome in p.experiences %}<div><a class="id"
href="{{ links.episode(src.run, src.strategy, id) }}">{{ id }}</a><br>
<span class="muted">{{ world }}: {{ outcome }}</span></div>{% else %}—{% endfor %}</td>
<td>{% for what, n in p.evidence_counts() %}<div>{{ what }} × {{ n }}</div>{% else %}—{% endfor %}
{% if p.evidence %}<details><summary>{{ p.evidence | length }} evidence ids</summary>{% for ev in p.evidence %}
<div class="id">{{ ev.id }} <span class="muted">{{ ev.anchor }} {{ ev.outcome }} ({{ ev.strength }})</span></div>
{% endfor %}</details>{% endif %}</td>
<td>{% for u in p.updates %}<div><span class="id">{{ u.id }}</span><br>{{ u.op }} by {{ u.actor }}
{% if u.gate %}<br><span class="muted">{{ u.gate.name }}: {{ "pass" if u.gate.passed else "fail" }}
{% if u.gate.reasons %}; {{ u.gate.reasons | join("; ") }}{% endif %}</span>{% endif %}</div>
{% else %}—{% endfor %}</td>
<td class="id"><b>{{ item.id }}</b>{% for parent in p.parents %}<br><span class="muted">built from</span>
<a href="{{ links.item(src.run, src.strategy, parent.id) }}">{{ parent.id }}</a>{% endfor %}</td>
<td>{% for d in p.derived %}<div><a class="id" href="{{ links.item(src.run, src.strategy, d.id) }}">{{ d.id }}</a>
{{ d.carrier }}</div>{% else %}—{% endfor %}</td></tr></table>
{% if links.revoke(src.run, src.strategy, item.id) and p.state != "revoked" %}
<p><a id="revoke" href="{{ links.revoke(src.run, src.strategy, item.id) }}">revoke this item…</a>
(shows what would go with it first)</p>{% endif %}
{% endblock %}
"""

REVOKE = """{% extends "store.html" %}
{% block body %}
{% if error %}<p class="bad" id="error">{{ error }}</p>{% endif %}
<p>Dry run: revoking <code>{{ target }}</code> would also revoke {{ cascade | length }} derived records
(nothing is written yet):</p>
<ul class="cascade">{% for id in cascade %}<li>{% if links.record(src.run, src.strategy, id) %}<a class="id"
href="{{ links.record(src.run, src.strategy, id) }}">{{ id }}</a>{% else %}<span class="id">{{ id }}</span>{% endif
%}</li>{% else %}<li>nothing else</li>{% endfor %}</ul>
<form method="post" action="/runs/{{ src.run }}/{{ src.strategy }}/revoke">
<input type="hidden" name="target" value="{{ target }}">
<p><label>Reason (kept with the revocation) <input name="reason" required size="50"></label></p>
<p><label>Author <input name="author" value="viewer" size="20"></label></p>
<p><label>Token (printed by <code>lle view</code>, or <code>LLE_VIEW_TOKEN</code>)
<input name="token" type="password" required size="30"></label></p>
<p><label><input type="checkbox" name="confirm" value="yes" required> I confirm: revoke {{ target }} and the
{{ cascade | length }} records above. A revocation is appended and cannot be undone.</label></p>
<p><button type="submit">Revoke</button></p>
</form>
{% endblock %}
"""

COMPARE = """{% extends "base.html" %}
{% block body %}
<p>a = <a href="{{ links.run(a) }}">{{ a }}</a>, b = <a href="{{ links.run(b) }}">{{ b }}</a></p>
<h2>Config</h2>
{% if found.config %}<table class="config"><tr><th>key</th><th>a</th><th>b</th></tr>
{% for row in found.config %}<tr><td>{{ row.key }}</td><td>{{ row.a | tojson }}</td><td>{{ row.b | tojson }}</td></tr>
{% endfor %}</table>{% else %}<p>The same (but for the id).</p>{% endif %}
<h2>Held-out success at the last round</h2>
<table class="diff"><tr><th>world</th><th>strategy</th><th>a</th><th>b</th><th>change (b − a)</th></tr>
{% for row in found.table %}<tr><td>{{ row.world }}</td><td>{{ row.strategy }}</td><td>{{ row.a | dash }}</td>
<td>{{ row.b | dash }}</td><td>{{ ("%+.3f" | format(row.change)) if row.change is not none else "—" }}</td></tr>
{% endfor %}</table>
<div>{% for svg in curves %}{% if svg %}<figure style="display:inline-block">{{ svg }}
<figcaption>{{ loop.cycle("a", "b") }}</figcaption></figure>{% endif %}{% endfor %}</div>
{% endblock %}
"""

TEMPLATES = {"compare.html": COMPARE, "base.html": BASE, "store.html": STORE_NAV, "runs.html": RUNS, "run.html": RUN,
             "episodes.html": EPISODES, "episode.html": EPISODE, "carriers.html": CARRIERS, "item.html": ITEM,
             "revoke.html": REVOKE}
