// The traffic-policy engine: compile a document once, evaluate it per request or connection.
export { compilePolicy, isCompiled, type CompiledPolicy, type CompileOptions } from './compile.js';
export { evaluate, type PolicyResult, type RuleTrace } from './evaluate.js';
export { PolicyState, type PolicyStateOptions } from './state.js';
export type { PolicyInput, RequestInput, ResponseInput, ConnectionInput, ActionVariables } from './context.js';
export type { HttpResponse, Ended, Mutations } from './actions/run.js';
