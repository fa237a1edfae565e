// AskUserQuestion prompts. One call may ask several questions: the agent sends one `question`
// event per question, all with the same questionId, and settles the request on the first
// answer. So the app groups them into one card and sends ONE question_response whose `answers`
// maps every question's text to its answer (option labels; several joined with ", ").

import type { QuestionOption } from './types';

export interface Ask { question: string; options: QuestionOption[]; multiSelect: boolean }

/** The answer value of an option: its label (what Claude reads), else its value. */
export const optionValue = (o: QuestionOption) => o.label || o.value;

/**
 * Adds one question event to the group of its questionId. A question already in the group
 * (the same text: a replay, or one event seen over both REST and the socket) is not added twice.
 * Returns whether the group changed.
 */
export function addAsk(group: Ask[], ev: { [k: string]: unknown }): boolean {
  const question = typeof ev.question === 'string' ? ev.question : '';
  if (group.some((a) => a.question === question)) return false;
  group.push({ question, options: Array.isArray(ev.options) ? (ev.options as QuestionOption[]) : [], multiSelect: !!ev.multiSelect });
  return true;
}

/**
 * The `answers` of a question_response: each question's text → the chosen labels, in the
 * options' order, joined with ", ". Null until every question has at least one choice.
 */
export function buildAnswers(group: Ask[], chosen: string[][]): Record<string, string> | null {
  const answers: Record<string, string> = {};
  for (let i = 0; i < group.length; i++) {
    const a = group[i];
    const sel = chosen[i] || [];
    const picked = a.options.map(optionValue).filter((v) => sel.includes(v));
    if (!picked.length) return null;
    answers[a.question] = a.multiSelect ? picked.join(', ') : picked[0];
  }
  return group.length ? answers : null;
}

/** Toggles value in the choices of one question (a radio replaces, a checkbox toggles). */
export function choose(chosen: string[][], i: number, value: string, multi: boolean): string[][] {
  const next = chosen.slice();
  const cur = next[i] || [];
  next[i] = multi ? (cur.includes(value) ? cur.filter((v) => v !== value) : [...cur, value]) : [value];
  return next;
}

/** What a stored answer says: the answers map (JSON), or an older client's plain answer. */
export function parseAnswered(s: string | undefined): Record<string, string> | string | undefined {
  if (s === undefined) return undefined;
  if (s.startsWith('{')) {
    try {
      return JSON.parse(s) as Record<string, string>;
    } catch {
      /* a plain answer that starts with a brace */
    }
  }
  return s;
}
