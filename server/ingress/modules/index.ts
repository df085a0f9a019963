// The registry of route-module filters: module name -> factory. The order they run in is
// MODULE_ORDER (order.ts), never this file's; a module configured on a route with no entry
// here makes the route answer 502 (refusing beats skipping a restriction).
import type { FilterFactory } from '../types.js';
import type { ModuleName } from './order.js';

export const FILTERS: Partial<Record<ModuleName, FilterFactory>> = {
};
