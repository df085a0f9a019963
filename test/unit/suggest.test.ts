// The one "did you mean" helper: near names suggested, far ones not, nearest first.
import { describe, expect, it } from 'vitest';
import { didYouMean, distance, nearest } from '../../provider/catalog/validate/suggest.js';

describe('did you mean', () => {
  it('measures edits case-insensitively', () => {
    expect(distance('kitten', 'sitting')).toBe(3);
    expect(distance('HTTPSEdge', 'httpsedge')).toBe(0);
    expect(distance('', 'abc')).toBe(3);
  });
  it('suggests the nearest names first, within a third of the length', () => {
    expect(nearest('rate-limt', ['rate-limit', 'redirect', 'deny'])).toEqual(['rate-limit']);
    expect(nearest('TCPEgde', ['TLSEdge', 'TCPEdge', 'HTTPSEdge'])).toEqual(['TCPEdge']);
    expect(nearest('httpsedge', ['HTTPSEdge', 'TCPEdge', 'TLSEdge'])).toEqual(['HTTPSEdge']);
    expect(nearest('offic', ['office', 'offices', 'home'])).toEqual(['office', 'offices']);
    expect(nearest('zzzzzz', ['rate-limit', 'deny'])).toEqual([]);
  });
  it('never suggests the word itself, and says nothing when nothing is near', () => {
    expect(didYouMean('deny', ['deny'])).toBe('');
    expect(didYouMean('dny', ['deny', 'log'])).toBe(' (did you mean deny?)');
    expect(didYouMean('dny', ['deny'], true)).toBe(' (did you mean "deny"?)');
  });
});
