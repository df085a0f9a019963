// An HTTPS edge with its routes (and their modules) declared as one object: a thin layer
// over the generated HttpsEdge and HttpsEdgeRoute bindings, so it works with any tool that
// reads their synthesized JSON (CDKTF or its community fork).
import { Construct } from 'constructs';
import { HttpsEdge, type HttpsEdgeConfig } from './gen/https-edge/index.js';
import { HttpsEdgeRoute, type HttpsEdgeRouteConfig } from './gen/https-edge-route/index.js';

/** A route as the route binding takes it, less the edge it belongs to. */
export type RouteProps = Omit<HttpsEdgeRouteConfig, 'edgeId'>;

export interface HttpsEdgeWithRoutesProps extends HttpsEdgeConfig {
  /**
   * Routes by name. The name becomes the route's construct id, so renaming a route
   * replaces it; reordering does not. Modules are the route binding's blocks
   * (`backend`, `ipRestriction`, `oauth`, ...). Default: no routes.
   */
  readonly routes?: Record<string, RouteProps>;
}

export class HttpsEdgeWithRoutes extends Construct {
  readonly edge: HttpsEdge;
  readonly routes: Record<string, HttpsEdgeRoute> = {};

  constructor(scope: Construct, id: string, props: HttpsEdgeWithRoutesProps) {
    super(scope, id);
    const { routes = {}, ...edge } = props;
    this.edge = new HttpsEdge(this, 'edge', edge);
    for (const [name, route] of Object.entries(routes)) {
      this.routes[name] = new HttpsEdgeRoute(this, `route-${name}`, { ...route, edgeId: this.edge.id });
    }
  }

  /** The edge's id (a token until apply). */
  get id(): string {
    return this.edge.id;
  }
}
