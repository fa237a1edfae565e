// team.mjs: the ccgrid team view on a phone, as a person uses it.
//
// specs: in Settings, save a skill spec and a teammate spec that uses it;
// after a reload both are listed. todos: a session whose model writes a todo
// list shows its tasks in the Team panel. teammate: a prompt whose model
// calls the Agent (Task) tool shows the subagent in the Team panel as
// working — the Go test holds the subagent's reply until the page saw that
// (sync point "teammate-working") — then stopped, with its output.
// axe-core (lib/a11y.mjs) checks the spec sections and the open Team panel in
// the light and dark colour schemes and the app's explicit themes; the
// script fails at the end with every violation (result.a11y stays empty).
// BETCODE_E2E: {cwd, machineOptional?, skill, teammate, todo: {prompt},
// delegate: {prompt}}; see agent/e2e/browser_team_test.go.
import { launch, phone, params, token, main, watch, log, sync, recordAlerts, timeout } from './lib/harness.mjs';
import { tid, norm, login, pickMachine, newSession, send, texts, waitTexts } from './lib/app.mjs';
import { Audit, withAxe } from './lib/a11y.mjs';

await main(async () => {
  const result = {};
  const ctx = await launch({ viewport: phone });
  const alerts = await recordAlerts(ctx);
  await withAxe(ctx);
  const page = await ctx.newPage();
  watch(page, 'team');
  const audit = new Audit();
  await login(page, token);
  await pickMachine(page, params.machine, { optional: !!params.machineOptional });
  const home = page.url();

  // specs: by their labels, as a screen reader names the fields.
  await page.locator(tid('settings')).click();
  const skillForm = page.getByRole('form', { name: 'New skill spec' });
  await skillForm.getByLabel('Name').fill(params.skill.name);
  await skillForm.getByLabel('Description').fill(params.skill.description);
  await skillForm.getByLabel('Type').selectOption('internal');
  await skillForm.getByLabel('SKILL.md content').fill(params.skill.content);
  await page.locator(tid('skill-spec-save')).click();
  await waitTexts(page, 'skill-spec', 'includes', params.skill.name);
  const mateForm = page.getByRole('form', { name: 'New teammate spec' });
  await mateForm.getByLabel('Name').fill(params.teammate.name);
  await mateForm.getByLabel('Role').fill(params.teammate.role);
  await mateForm.getByLabel('Instructions').fill(params.teammate.instructions);
  await mateForm.getByRole('checkbox', { name: params.skill.name }).check();
  await page.locator(tid('teammate-spec-save')).click();
  await waitTexts(page, 'teammate-spec', 'includes', params.teammate.name);
  log('specs saved');
  await page.reload({ waitUntil: 'domcontentloaded' });
  result.skillSpecs = await waitTexts(page, 'skill-spec', 'includes', params.skill.name);
  result.teammateSpecs = await waitTexts(page, 'teammate-spec', 'includes', params.teammate.name);
  log('specs listed after a reload');
  await audit.check(page, 'settings: specs', { include: ['section[aria-labelledby="mates-h"]', 'section[aria-labelledby="skills-h"]'] });

  // todos: the session's own task list in the Team panel.
  await page.goto(home, { waitUntil: 'domcontentloaded' });
  await newSession(page, { cwd: params.cwd, prompt: params.todo.prompt });
  const panel = page.locator(tid('team-panel'));
  await panel.waitFor();
  await panel.locator('summary').first().click();
  result.tasks = await waitTexts(page, 'team-task', 'count', params.todo.count);
  log('todo list in the Team panel', { tasks: result.tasks });

  // teammate: working, then stopped with its output.
  await send(page, params.delegate.prompt);
  const working = page.locator(tid('teammate-status'), { hasText: 'working' });
  const allow = page.locator(tid('allow-once'));
  result.permissionsAllowed = 0;
  for (;;) {
    // The Agent call may ask permission first, depending on the rules.
    await page.locator(`${tid('allow-once')}, ${tid('teammate-status')}:has-text("working")`).first().waitFor();
    if (await working.count()) break;
    await allow.first().click();
    result.permissionsAllowed++;
  }
  result.working = norm(await page.locator(tid('teammate')).first().textContent());
  log('teammate working', { teammate: result.working });
  await sync('teammate-working');
  await page.locator(tid('teammate-status'), { hasText: 'stopped' }).waitFor({ timeout: Math.max(timeout, 60000) });
  const mate = page.locator(tid('teammate')).first();
  await mate.locator('summary').click();
  result.teammate = {
    text: norm(await mate.locator('summary').textContent()),
    status: norm(await mate.locator(tid('teammate-status')).textContent()),
    output: norm(await mate.locator(tid('teammate-output')).textContent()),
  };
  result.tasksAfter = (await texts(page, 'team-task')).map(norm);
  await audit.check(page, 'team panel', { include: [tid('team-panel')], height: 2400 });
  log('teammate stopped', result.teammate);
  audit.assertClean();
  result.a11y = audit.violations;
  result.alerts = alerts;
  return result;
});
