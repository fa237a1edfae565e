import { useEffect, useState } from 'preact/hooks';
import { ApiError, del, get, post, q } from '../api';
import { errText } from '../store';
import type { SkillSpec, SkillType, TeammateSpec } from '../types';
import { ErrorBox, Spinner } from './common';

/** Settings: the machine's saved teammate specs and skill specs (list, create, delete). */
export function Specs() {
  const [specs, setSpecs] = useState<TeammateSpec[] | null>(null);
  const [skills, setSkills] = useState<SkillSpec[] | null>(null);
  const [unsupported, setUnsupported] = useState(false);
  const [error, setError] = useState('');
  const load = () =>
    Promise.all([get<TeammateSpec[]>('/teammate-specs'), get<SkillSpec[]>('/skill-specs')]).then(
      ([a, b]) => {
        setSpecs(a || []);
        setSkills(b || []);
        setError('');
      },
      (e) => (e instanceof ApiError && e.status === 501 ? setUnsupported(true) : setError(errText(e))),
    );
  useEffect(() => void load(), []);
  if (unsupported) {
    return (
      <section class="card stack" aria-labelledby="specs-h">
        <h2 id="specs-h">Teammates and skills</h2>
        <p class="muted">This machine’s agent keeps no teammate or skill specs: update it to use them.</p>
      </section>
    );
  }
  return (
    <>
      <TeammateSpecs specs={specs} skills={skills || []} reload={load} loadError={error} />
      <SkillSpecs skills={skills} reload={load} loadError={error} />
    </>
  );
}

const val = (e: Event) => (e.target as HTMLInputElement).value;

function TeammateSpecs(p: { specs: TeammateSpec[] | null; skills: SkillSpec[]; reload: () => Promise<void>; loadError: string }) {
  const [name, setName] = useState('');
  const [role, setRole] = useState('');
  const [instructions, setInstructions] = useState('');
  const [chosen, setChosen] = useState<string[]>([]);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState('');
  const skillName = new Map(p.skills.map((k) => [k.id, k.name]));
  const add = async (e: Event) => {
    e.preventDefault();
    if (!name.trim()) return setError('Give the teammate a name, e.g. researcher');
    setBusy(true);
    setError('');
    try {
      await post<TeammateSpec>('/teammate-specs', {
        name: name.trim(), role: role.trim(), instructions: instructions.trim(), skillIds: chosen.filter((id) => skillName.has(id)),
      });
      setName('');
      setRole('');
      setInstructions('');
      setChosen([]);
      await p.reload();
    } catch (err) {
      setError(errText(err));
    } finally {
      setBusy(false);
    }
  };
  const remove = (s: TeammateSpec) => del(`/teammate-specs/${q(s.id)}`).then(() => (setError(''), p.reload()), (e) => setError(errText(e)));
  const toggle = (id: string) => setChosen(chosen.includes(id) ? chosen.filter((x) => x !== id) : [...chosen, id]);
  return (
    <section class="card stack" aria-labelledby="mates-h">
      <h2 id="mates-h">Teammate specs</h2>
      <p class="muted small">Reusable teammates: a role, instructions and skills a subagent starts with.</p>
      <ErrorBox error={p.loadError} />
      {!p.specs && !p.loadError && <Spinner />}
      {p.specs && (
        <ul class="list compact" aria-label="Teammate specs">
          {p.specs.map((s) => (
            <li key={s.id} class="row static" data-testid="teammate-spec">
              <span class="grow">
                <span class="row-title">{s.name}</span>
                {s.role && <span class="muted small block">{s.role}</span>}
                {s.skillIds.length > 0 && (
                  <span class="small block">
                    Skills: {s.skillIds.map((id) => skillName.get(id) || id).join(', ')}
                  </span>
                )}
                {s.instructions && <span class="muted small ellipsis">{s.instructions}</span>}
              </span>
              <button type="button" class="btn" aria-label={`Delete teammate spec ${s.name}`} onClick={() => remove(s)}>Delete</button>
            </li>
          ))}
          {!p.specs.length && <li class="muted small">No teammate spec.</li>}
        </ul>
      )}
      <form class="stack" onSubmit={add} aria-label="New teammate spec">
        <label for="mate-name">Name</label>
        <input id="mate-name" value={name} placeholder="researcher" autocomplete="off" onInput={(e) => setName(val(e))} />
        <label for="mate-role">Role</label>
        <input id="mate-role" value={role} placeholder="Research specialist" onInput={(e) => setRole(val(e))} />
        <label for="mate-instructions">Instructions</label>
        <textarea id="mate-instructions" rows={3} value={instructions} placeholder="Cite your sources." onInput={(e) => setInstructions(val(e))} />
        <fieldset class="skill-pick">
          <legend>Skills</legend>
          {p.skills.map((k) => (
            <label key={k.id} class="option">
              <input type="checkbox" checked={chosen.includes(k.id)} onChange={() => toggle(k.id)} /> {k.name}
            </label>
          ))}
          {!p.skills.length && <p class="muted small">No skill specs yet: add one below.</p>}
        </fieldset>
        <button type="submit" class="btn primary" data-testid="teammate-spec-save" disabled={busy}>Save teammate spec</button>
      </form>
      <ErrorBox error={error} />
    </section>
  );
}

const TYPES: SkillType[] = ['internal', 'external', 'official'];

function SkillSpecs(p: { skills: SkillSpec[] | null; reload: () => Promise<void>; loadError: string }) {
  const [name, setName] = useState('');
  const [description, setDescription] = useState('');
  const [type, setType] = useState<SkillType>('internal');
  const [plugin, setPlugin] = useState('');
  const [content, setContent] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState('');
  const add = async (e: Event) => {
    e.preventDefault();
    if (!name.trim()) return setError('Give the skill a name, e.g. db-query');
    if (type === 'internal' && !content.trim()) return setError('An internal skill needs its SKILL.md content');
    setBusy(true);
    setError('');
    try {
      await post<SkillSpec>('/skill-specs', {
        name: name.trim(), description: description.trim(), skillType: type, skillMdContent: content || undefined,
        pluginName: type === 'external' ? plugin.trim() || undefined : undefined,
      });
      setName('');
      setDescription('');
      setPlugin('');
      setContent('');
      await p.reload();
    } catch (err) {
      setError(errText(err));
    } finally {
      setBusy(false);
    }
  };
  const remove = (k: SkillSpec) => del(`/skill-specs/${q(k.id)}`).then(() => (setError(''), p.reload()), (e) => setError(errText(e)));
  return (
    <section class="card stack" aria-labelledby="skills-h">
      <h2 id="skills-h">Skill specs</h2>
      <p class="muted small">Skills teammates can be given: Claude’s own, a plugin’s, or your own SKILL.md.</p>
      {!p.skills && !p.loadError && <Spinner />}
      {p.skills && (
        <ul class="list compact" aria-label="Skill specs">
          {p.skills.map((k) => (
            <li key={k.id} class="row static" data-testid="skill-spec">
              <span class="grow">
                <span class="row-title">{k.name}</span>
                <span class="muted small block">
                  {k.skillType}
                  {k.pluginName ? ` · ${k.pluginName}` : ''}
                  {k.description ? ` · ${k.description}` : ''}
                </span>
              </span>
              <button type="button" class="btn" aria-label={`Delete skill ${k.name}`} onClick={() => remove(k)}>Delete</button>
            </li>
          ))}
          {!p.skills.length && <li class="muted small">No skill spec.</li>}
        </ul>
      )}
      <form class="stack" onSubmit={add} aria-label="New skill spec">
        <label for="skill-name">Name</label>
        <input id="skill-name" value={name} placeholder="db-query" autocomplete="off" onInput={(e) => setName(val(e))} />
        <label for="skill-description">Description</label>
        <input id="skill-description" value={description} placeholder="Run SQL against the dev database" onInput={(e) => setDescription(val(e))} />
        <label for="skill-type">Type</label>
        <select id="skill-type" value={type} onChange={(e) => setType(val(e) as SkillType)}>
          {TYPES.map((t) => (
            <option key={t} value={t}>{t}</option>
          ))}
        </select>
        {type === 'external' && (
          <>
            <label for="skill-plugin">Plugin</label>
            <input id="skill-plugin" value={plugin} placeholder="document-tools" onInput={(e) => setPlugin(val(e))} />
          </>
        )}
        <label for="skill-md">SKILL.md content{type === 'internal' ? '' : ' (optional)'}</label>
        <textarea id="skill-md" rows={5} class="mono" value={content} placeholder={'# DB query\n\nConnect with psql and…'} onInput={(e) => setContent(val(e))} />
        <button type="submit" class="btn primary" data-testid="skill-spec-save" disabled={busy}>Save skill</button>
      </form>
      <ErrorBox error={error} />
    </section>
  );
}
