// Dictation's pure part: how a transcript joins what a box already holds.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { appendText } from '../src/ui/VoiceButton';

test('dictated text is appended with one space between', () => {
  assert.equal(appendText('', 'list the files'), 'list the files');
  assert.equal(appendText('please', 'list the files'), 'please list the files');
  assert.equal(appendText('please ', 'list'), 'please list');
  assert.equal(appendText('line one\n', 'two'), 'line one\ntwo');
  assert.equal(appendText('kept', ''), 'kept');
});
